#pragma once
// How redlimit's core is built: compiled once into the library (the default, redlimit::redlimit),
// or inlined into the user's code when REDLIMIT_HEADER_ONLY is defined (redlimit::header_only).
//
// The bodies of the core (everything above the transport seam) live in include/redlimit/impl/
// *-inl.hpp. Each declaring header includes its -inl.hpp at the end in header-only mode; otherwise
// src/redlimit.cpp includes them all, once, and REDLIMIT_INLINE expands to nothing.
#ifdef REDLIMIT_HEADER_ONLY
#define REDLIMIT_INLINE inline
#else
#define REDLIMIT_INLINE
#endif
