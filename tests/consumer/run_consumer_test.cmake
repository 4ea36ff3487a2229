# Installs ps into a scratch prefix, then configures, builds and runs tests/consumer against it:
# an in-process job, and the README's example program started by the installed ps-launch.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}")
  endif()
  message("${out}")
  set(run_out "${out}" PARENT_SCOPE)
endfunction()
run(${CMAKE_COMMAND} --install ${PS_BUILD_DIR} --prefix ${WORK_DIR}/prefix)
# The README's first C++ block, as a user would copy it.
file(READ ${PS_SOURCE_DIR}/README.md readme)
string(FIND "${readme}" "```cpp\n" begin)
if(begin EQUAL -1)
  message(FATAL_ERROR "README.md has no C++ example")
endif()
math(EXPR begin "${begin} + 7")
string(SUBSTRING "${readme}" ${begin} -1 rest)
string(FIND "${rest}" "```" end)
string(SUBSTRING "${rest}" 0 ${end} example)
file(WRITE ${WORK_DIR}/readme_example.cc "${example}")
run(${CMAKE_COMMAND} -S ${PS_SOURCE_DIR}/tests/consumer -B ${WORK_DIR}/build
    -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release
    -DREADME_EXAMPLE=${WORK_DIR}/readme_example.cc)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/consumer)
# The installed launcher (a link into share/ps/tracker) runs it: 1 server, 2 workers, so each
# id's sum is twice its value, and only if the values moved with their sorted keys.
run(${WORK_DIR}/prefix/bin/ps-launch -s 1 -w 2 --timeout 120 -- ${WORK_DIR}/build/readme_example)
foreach(line "[worker 0] id 1: 2" "[worker 0] id 7: 4" "[worker 1] id 1: 2" "[worker 1] id 7: 4")
  string(FIND "${run_out}" "${line}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the README example under the installed ps-launch did not print "
                        "'${line}':\n${run_out}")
  endif()
endforeach()
# A configuration error that the program does not catch: one line, a documented exit code
# (81: bad configuration), no "terminate called" and no glog note.
execute_process(COMMAND ${CMAKE_COMMAND} -E env PS_ROLE=worker PS_VNODES=zero
                        ${WORK_DIR}/build/readme_example
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(STRIP "${err}" err)
if(NOT rc EQUAL 81 OR NOT err STREQUAL
   "ps: bad configuration: PS_VNODES='zero': expected an integer in [1, 65536]")
  message(FATAL_ERROR "a bad PS_VNODES ended the README example with ${rc} and:\n${err}")
endif()
# Installed apps find the installed library without LD_LIBRARY_PATH.
run(${WORK_DIR}/prefix/bin/ps_countmin --version)
message("PASSED consumer: find_package, in-process job, README example under the installed "
        "ps-launch")
