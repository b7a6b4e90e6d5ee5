// The core of redlimit (everything above the transport seam), compiled once: the bodies of the
// headers, from include/redlimit/impl/. With REDLIMIT_HEADER_ONLY (redlimit::header_only) this file
// is not built and each header includes its own bodies inline instead.
#ifdef REDLIMIT_HEADER_ONLY
#error "src/redlimit.cpp is the compiled core: do not build it with REDLIMIT_HEADER_ONLY"
#endif

#include "redlimit/impl/async_lane-inl.hpp"
#include "redlimit/impl/breaker-inl.hpp"
#include "redlimit/impl/clock-inl.hpp"
#include "redlimit/impl/context-inl.hpp"
#include "redlimit/impl/decide-inl.hpp"
#include "redlimit/impl/decision_path-inl.hpp"
#include "redlimit/impl/decode-inl.hpp"
#include "redlimit/impl/keys-inl.hpp"
#include "redlimit/impl/leases-inl.hpp"
#include "redlimit/impl/limit-inl.hpp"
#include "redlimit/impl/rate_limiter-inl.hpp"
#include "redlimit/impl/script-inl.hpp"
#include "redlimit/impl/script_async-inl.hpp"
#include "redlimit/impl/scripts-inl.hpp"
#include "redlimit/impl/sha1-inl.hpp"
#include "redlimit/impl/strategies-inl.hpp"
#include "redlimit/impl/strategy-inl.hpp"
#include "redlimit/impl/sync_lane-inl.hpp"
#include "redlimit/impl/url-inl.hpp"
#include "redlimit/impl/url_sentinel-inl.hpp"
