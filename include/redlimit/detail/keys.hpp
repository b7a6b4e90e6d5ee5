#pragma once
// Key layout: <prefix>{<resource>|<subject>}:<kind>
//
// Resource and subject are percent-escaped ('%', '{', '}', ':', '|', bytes < 0x20 and 0x7f become %XX),
// so the pair inside the braces is injective and the hash tag can never be closed early or forged:
// every key of one (resource, subject) lands in one Redis Cluster slot, and no subject can name a
// key of another subject or resource.
#include "redlimit/detail/config.hpp"
#include <cstdint>
#include <string>
#include <string_view>

namespace redlimit::detail {

constexpr std::size_t kMaxSubjectBytes = 1024;
constexpr std::size_t kMaxResourceBytes = 256;
constexpr std::size_t kMaxPrefixBytes = 64;

// Percent-escapes the bytes that are structural in our keys.
std::string escape_key_part(std::string_view raw);

// Throws InvalidArgument for an empty or oversized subject.
void check_subject(std::string_view subject);
// Throws InvalidArgument for an empty or oversized resource.
void check_resource(std::string_view resource);
// Throws InvalidArgument for a prefix with braces or over kMaxPrefixBytes.
void check_prefix(std::string_view prefix);

// `kind` names the state's layout ("fw", "sl", "sw", "tb", "lb", "pol"), so two strategies that
// share a resource name never read each other's state.
std::string make_key(std::string_view prefix, std::string_view resource, std::string_view subject,
                     std::string_view kind);

// Redis Cluster's slot of a key (CRC16 of the hash tag, mod 16384).
std::uint16_t key_slot(std::string_view key);

}  // namespace redlimit::detail

#ifdef REDLIMIT_HEADER_ONLY
#include "redlimit/impl/keys-inl.hpp"
#endif
