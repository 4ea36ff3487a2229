# Debian packages of the install components (`cpack -G DEB` in the build directory, or
# scripts/package.sh): libps0 (the library), libps-dev (headers, CMake config), ps-tools (the
# launcher and the simulator), ps-apps (the bundled apps). Files are named ps_<package>_...deb,
# so `apt-get install ./ps_*.deb` installs them all and pulls their dependencies.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ps)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "ps developers <ps-dev@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "parameter server for distributed machine learning")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL lib dev tools apps)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)  # "libps0 (= version)" from the DEPENDS below
set(CPACK_COMPONENT_DEV_DEPENDS lib)
set(CPACK_COMPONENT_TOOLS_DEPENDS lib)
set(CPACK_COMPONENT_APPS_DEPENDS lib)
# System libraries from the binaries themselves (dpkg-shlibdeps); libps is found in the build
# tree and its package named by the component dependency.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_DEV_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_BINARY_DIR})
set(CPACK_DEBIAN_LIB_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_LIB_PACKAGE_NAME libps0)
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libps-dev)
set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME ps-tools)
set(CPACK_DEBIAN_APPS_PACKAGE_NAME ps-apps)
set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS "python3 (>= 3.7)")
# Loaded at run time by the metrics server, so dpkg-shlibdeps does not see it (CMakeLists.txt).
set(CPACK_DEBIAN_LIB_PACKAGE_DEPENDS "${PS_MHD_PACKAGE}")
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION science)
set(CPACK_DEBIAN_APPS_PACKAGE_SECTION science)
set(CPACK_COMPONENT_LIB_DESCRIPTION "ps parameter server: shared library")
set(CPACK_COMPONENT_DEV_DESCRIPTION "ps parameter server: headers and CMake package")
set(CPACK_COMPONENT_TOOLS_DESCRIPTION "ps parameter server: ps-launch and ps_sim")
set(CPACK_COMPONENT_APPS_DESCRIPTION
    "ps parameter server: sparse logistic regression, LDA and CountMin apps")
find_program(PS_DPKG dpkg)
if(PS_DPKG)
  execute_process(COMMAND ${PS_DPKG} --print-architecture OUTPUT_VARIABLE PS_DEB_ARCH
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
else()
  set(PS_DEB_ARCH amd64)
endif()
foreach(c lib dev tools apps)
  string(TOUPPER ${c} C)
  set(CPACK_DEBIAN_${C}_FILE_NAME
      "ps_${CPACK_DEBIAN_${C}_PACKAGE_NAME}_${PROJECT_VERSION}_${PS_DEB_ARCH}.deb")
endforeach()
include(CPack)
