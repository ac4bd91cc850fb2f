# Writes OUT, a header defining JITD_GIT_REVISION: `git describe --always
# --dirty` of SRC, or "unknown" outside a git checkout. Rewritten only when
# the revision changed, so that only what includes it recompiles. Run at
# every build (the jitd_revision target), not only at configure: a
# binary's --version names the commit it was built from.
execute_process(COMMAND git -C "${SRC}" describe --always --dirty --abbrev=12
                OUTPUT_VARIABLE revision OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE failed)
if(failed OR revision STREQUAL "")
  set(revision "unknown")
endif()
set(content "#pragma once\n#define JITD_GIT_REVISION \"${revision}\"\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL content)
  file(WRITE "${OUT}" "${content}")
endif()
