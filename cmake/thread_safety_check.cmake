# One ThreadSafety.* test (CMakeLists.txt): compiles tests/thread_safety/annotations_check.cc with
# clang's thread-safety analysis as errors, front end only.
#   CHECK=Correct: the file as it is must compile.
#   CHECK=<violation>: with -DTOLLGATE_CHECK_<violation>, the compile must fail with the analysis's
#   error for that violation (another failure, a missing header say, does not count).
# Usage: cmake -DCOMPILER=clang++ -DSOURCE_DIR=<repo> -DCHECK=<name> -P thread_safety_check.cmake
set(expected_Correct "")
set(expected_GuardedMember "reading variable 'total_' requires holding mutex 'mu_'")
set(expected_RequiresCaller "calling function 'reset_locked' requires holding mutex 'mu_' exclusively")
set(expected_AfterUnlock "writing variable 'total_' requires holding mutex 'mu_' exclusively")
if(NOT DEFINED expected_${CHECK})
  message(FATAL_ERROR "thread_safety_check.cmake: unknown CHECK '${CHECK}'")
endif()

set(flags -std=c++20 -fsyntax-only -Wthread-safety -Werror=thread-safety -I${SOURCE_DIR}/src)
if(NOT CHECK STREQUAL "Correct")
  list(APPEND flags -DTOLLGATE_CHECK_${CHECK})
endif()
execute_process(COMMAND ${COMPILER} ${flags} ${SOURCE_DIR}/tests/thread_safety/annotations_check.cc
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE out)

if(CHECK STREQUAL "Correct")
  if(NOT status EQUAL 0 OR NOT out STREQUAL "")
    message(FATAL_ERROR "the correct uses did not compile cleanly (status ${status}):\n${out}")
  endif()
  message(STATUS "the correct uses compile cleanly")
  return()
endif()
string(FIND "${out}" "${expected_${CHECK}}" at)
if(status EQUAL 0 OR at EQUAL -1 OR NOT out MATCHES "error: .*\\[-Werror,-Wthread-safety")
  message(FATAL_ERROR "expected the compile to fail with \"${expected_${CHECK}}\" "
                      "(a thread-safety error); status ${status}, output:\n${out}")
endif()
message(STATUS "refused as expected: ${expected_${CHECK}}")
