# One step of the install test (cmake -P), chosen by STEP:
#   install   cmake --install BUILD_DIR into WORK_DIR/prefix (fresh)
#   layout    the prefix holds what CONTRACT.md promises, and the installed
#             binaries run from it
#   consumer  a project using find_package(jitd) + jitd::client configures
#             with SQLite, spdlog, fmt, CLI11 and toml++ made unfindable,
#             builds, links none of them (nor xxHash, hiredis or jitd's
#             cache) and runs against the prefix
#   consumer_fallback  the same project with jitd::client_fallback
#             (find_package(jitd COMPONENTS client_fallback))
set(prefix ${WORK_DIR}/prefix)

function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "failed (${result}): ${ARGV}\n${out}\n${err}")
  endif()
  set(run_output "${out}${err}" PARENT_SCOPE)
endfunction()

if(STEP STREQUAL "install")
  file(REMOVE_RECURSE ${prefix})
  run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})

elseif(STEP STREQUAL "layout")
  foreach(path bin/jitd bin/jitctl include/jitd/client.h include/jitd/cuda_module.h include/jitd/cache.h
               include/jitd/blob.h include/jitd/client_fallback.h
               include/jitd/v1/compiler.pb.h
               include/jitd/v1/cache_admin.grpc.pb.h lib/cmake/jitd/jitdConfig.cmake
               lib/cmake/jitd/jitdConfigVersion.cmake lib/cmake/jitd/jitdTargets.cmake)
    if(NOT EXISTS ${prefix}/${path})
      message(FATAL_ERROR "missing from the installed prefix: ${path}")
    endif()
  endforeach()
  if(NOT IS_DIRECTORY ${prefix}/share/jitd/kernels)
    message(FATAL_ERROR "missing from the installed prefix: share/jitd/kernels/")
  endif()
  # The installed daemon finds the installed kernels by default.
  run(${prefix}/bin/jitd --help)
  string(FIND "${run_output}" "${prefix}/share/jitd/kernels" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "installed jitd does not default to ${prefix}/share/jitd/kernels:\n${run_output}")
  endif()
  run(${prefix}/bin/jitctl --help)

elseif(STEP STREQUAL "consumer" OR STEP STREQUAL "consumer_fallback")
  set(build ${WORK_DIR}/${STEP}-build)
  set(with_fallback OFF)
  if(STEP STREQUAL "consumer_fallback")
    set(with_fallback ON)
  endif()
  file(REMOVE_RECURSE ${build})
  run(${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${build} -DCMAKE_BUILD_TYPE=Release
      -DCMAKE_PREFIX_PATH=${prefix} -DWITH_FALLBACK=${with_fallback})
  run(${CMAKE_COMMAND} --build ${build})
  if(NOT with_fallback)
    file(READ ${build}/CMakeFiles/consumer.dir/link.txt link_line)
    string(REGEX MATCHALL "lib(jitd_[a-z_]+|sqlite3|spdlog|fmt|xxhash|hiredis)[.]" linked "${link_line}")
    foreach(lib IN LISTS linked)
      if(NOT lib MATCHES "^lib(jitd_base|jitd_blob|jitd_proto|jitd_spec_file|jitd_client)[.]$")
        message(FATAL_ERROR "a consumer of jitd::client alone links ${lib}:\n${link_line}")
      endif()
    endforeach()
  endif()
  run(${build}/consumer)
  if(NOT run_output MATCHES "consumer ok")
    message(FATAL_ERROR "the consumer ran but did not report success:\n${run_output}")
  endif()

else()
  message(FATAL_ERROR "unknown STEP '${STEP}'")
endif()
