# Install rules: what `cmake --install` puts where, so that other projects can consume pinpool
# with find_package(pinpool CONFIG) (target pinpool::pinpool) or with pkg-config (pinpool.pc).
#
# Included by the top-level CMakeLists.txt when PINPOOL_INSTALL is ON, after the `pinpool` target
# exists. Everything goes to GNUInstallDirs locations:
#   ${LIBDIR}/libpinpool.so.<version>, .so.<major>   component pinpool_Runtime
#   ${LIBDIR}/libpinpool.so, ${INCLUDEDIR}/pinpool/*.h (with the generated version.h),
#   ${LIBDIR}/cmake/pinpool/*.cmake, ${LIBDIR}/pkgconfig/pinpool.pc   component pinpool_Development
#   ${BINDIR}/pinpool-info (when PINPOOL_BUILD_TOOLS)                  component pinpool_Tools
#   libpinpool_ucx / libpinpool_fabric with their header, CMake component and .pc file, when
#   built (cmake/InstallProviders.cmake)                                  components pinpool_Ucx,
#                                                                       pinpool_Fabric
#
# The library's internals (the rooms' objects, also built as the static pinpool_core) are linked
# into libpinpool.so and hidden there (hidden visibility, the version script made from cmake/libpinpool.map.in): they are not
# installed and are no dependency of consumers. Abseil is (absl::status/statusor appear in public
# headers), and so is libibverbs (pinpool/verbs.h includes <infiniband/verbs.h>), so both the
# CMake package and the .pc file declare them.
#
# Both the CMake package and pinpool.pc are relocatable with `cmake --install --prefix P` and
# DESTDIR: the CMake files find the prefix from their own location, and pinpool.pc is written at
# install time from the prefix actually installed to.

include(CMakePackageConfigHelpers)

# Where the package files go. Plain variables, not cache entries, so that they follow
# CMAKE_INSTALL_LIBDIR when GNUInstallDirs recomputes it for a new prefix.
set(PINPOOL_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/pinpool")
set(PINPOOL_INSTALL_PKGCONFIGDIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig")

# --- library and headers --------------------------------------------------------------------
install(TARGETS pinpool
  EXPORT pinpoolTargets
  LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}"
          COMPONENT pinpool_Runtime
          NAMELINK_COMPONENT pinpool_Development
  ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT pinpool_Development
  RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}" COMPONENT pinpool_Runtime)
# (The include directory consumers get is the target's $<INSTALL_INTERFACE:...> entry.)

install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/pinpool"
  DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
  COMPONENT pinpool_Development
  FILES_MATCHING PATTERN "*.h"
  # The optional providers' headers go with their libraries (cmake/InstallProviders.cmake).
  PATTERN "ucx.h" EXCLUDE PATTERN "fabric.h" EXCLUDE)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/include/pinpool/version.h"
  DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/pinpool"
  COMPONENT pinpool_Development)

# --- tools -----------------------------------------------------------------------------------
# pinpool-info (tools/pinpool_info), defined before this file is included. It links the
# library's internals statically (pinpool_core), so it runs from any prefix on its own.
if(TARGET pinpool_info)
  install(TARGETS pinpool_info RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}" COMPONENT pinpool_Tools)
endif()

# --- CMake package: find_package(pinpool CONFIG) ----------------------------------------------
install(EXPORT pinpoolTargets
  NAMESPACE pinpool::
  DESTINATION "${PINPOOL_INSTALL_CMAKEDIR}"
  COMPONENT pinpool_Development)

configure_package_config_file(
  "${CMAKE_CURRENT_LIST_DIR}/pinpoolConfig.cmake.in"
  "${CMAKE_CURRENT_BINARY_DIR}/pinpoolConfig.cmake"
  INSTALL_DESTINATION "${PINPOOL_INSTALL_CMAKEDIR}")
write_basic_package_version_file(
  "${CMAKE_CURRENT_BINARY_DIR}/pinpoolConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}"
  COMPATIBILITY SameMajorVersion)
install(FILES
  "${CMAKE_CURRENT_BINARY_DIR}/pinpoolConfig.cmake"
  "${CMAKE_CURRENT_BINARY_DIR}/pinpoolConfigVersion.cmake"
  DESTINATION "${PINPOOL_INSTALL_CMAKEDIR}"
  COMPONENT pinpool_Development)

# --- pkg-config: pinpool.pc ---------------------------------------------------------------------
# Written at install time, not configure time: the prefix in a .pc file is absolute, and with
# `cmake --install --prefix P` it is only known then. Each prefix gets its own staging file so that
# concurrent installs of one build tree into different prefixes (the packaging tests) do not race.
foreach(dir IN ITEMS LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(PINPOOL_PC_${dir} "${CMAKE_INSTALL_${dir}}")
  else()
    # Escaped twice: it must reach the .pc file as the literal text ${prefix}.
    set(PINPOOL_PC_${dir} "\\\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
# Abseil has no ABI stability across releases: ask for the one pinpool was built with.
set(pinpool_pc_requires "absl_status absl_statusor")
if(absl_VERSION)
  set(pinpool_pc_requires "absl_status = ${absl_VERSION}, absl_statusor = ${absl_VERSION}")
endif()
string(APPEND pinpool_pc_requires ", libibverbs")
if(IS_ABSOLUTE "${PINPOOL_INSTALL_PKGCONFIGDIR}")
  set(pinpool_pc_destination "${PINPOOL_INSTALL_PKGCONFIGDIR}")
else()
  set(pinpool_pc_destination "\${CMAKE_INSTALL_PREFIX}/${PINPOOL_INSTALL_PKGCONFIGDIR}")
endif()

install(CODE "
  set(PINPOOL_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  set(PINPOOL_PC_LIBDIR \"${PINPOOL_PC_LIBDIR}\")
  set(PINPOOL_PC_INCLUDEDIR \"${PINPOOL_PC_INCLUDEDIR}\")
  set(PINPOOL_PC_VERSION \"${PROJECT_VERSION}\")
  set(PINPOOL_PC_REQUIRES \"${pinpool_pc_requires}\")
  set(PINPOOL_PC_DESCRIPTION \"${PROJECT_DESCRIPTION}\")
  string(MD5 pinpool_pc_key \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}\")
  set(pinpool_pc \"${CMAKE_CURRENT_BINARY_DIR}/pkgconfig/\${pinpool_pc_key}/pinpool.pc\")
  configure_file(\"${CMAKE_CURRENT_LIST_DIR}/pinpool.pc.in\" \"\${pinpool_pc}\" @ONLY)
  file(INSTALL DESTINATION \"${pinpool_pc_destination}\" TYPE FILE FILES \"\${pinpool_pc}\")
  get_filename_component(pinpool_pc_dir \"\${pinpool_pc}\" DIRECTORY)
  file(REMOVE_RECURSE \"\${pinpool_pc_dir}\")
" COMPONENT pinpool_Development)

# --- optional provider libraries: libpinpool_ucx, libpinpool_fabric ------------------------------
include("${CMAKE_CURRENT_LIST_DIR}/InstallProviders.cmake")
