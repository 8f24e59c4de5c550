// Which sanitizer a test binary is built with, for gcc and clang alike: gcc defines
// __SANITIZE_ADDRESS__ / __SANITIZE_THREAD__, clang 14 answers __has_feature instead.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define TOLLGATE_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define TOLLGATE_TSAN 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) && !defined(TOLLGATE_ASAN)
#define TOLLGATE_ASAN 1
#endif
#if __has_feature(thread_sanitizer) && !defined(TOLLGATE_TSAN)
#define TOLLGATE_TSAN 1
#endif
#endif
