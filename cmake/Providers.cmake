# The optional provider libraries: libpinpool_ucx (UCX domain, pinpool/ucx.h) and libpinpool_fabric
# (libfabric domain and grants, pinpool/fabric.h). Each is a small shared library linking the
# core (libpinpool) and its provider; the core itself never links UCX or libfabric, so users of the
# core need neither, and a machine without libucx-dev / libfabric-dev builds everything else.
#
#   PINPOOL_WITH_UCX, PINPOOL_WITH_FABRIC: AUTO (default: built when pkg-config finds the provider),
#   ON (the provider is required: configuring fails without it), OFF (never built).
#
# Targets: pinpool_ucx (alias pinpool::ucx), pinpool_fabric (alias pinpool::fabric). Sources live
# in src/providers/<provider>/, above the core's rooms: they use libpinpool's public headers only
# (the users' ones and the implementer's pinpool/provider.h: the Domain interface, checked chunk
# records, GrantLock for grants), so they link with it like any domain writer's library would.
# Built with the core's discipline: hidden visibility, PINPOOL_EXPORT on what their header
# declares, and a version script each (generated from cmake/libpinpool_provider.map.in), so that they export their
# API and nothing else (tests/linking/check-exports.sh checks them too). Installed by
# cmake/InstallProviders.cmake as components of the CMake package and as their own .pc files.
# Included by the top-level CMakeLists.txt after the core target exists.

set(PINPOOL_WITH_UCX AUTO CACHE STRING "Build libpinpool_ucx, the UCX domain: AUTO, ON or OFF")
set(PINPOOL_WITH_FABRIC AUTO CACHE STRING
    "Build libpinpool_fabric, the libfabric domain: AUTO, ON or OFF")
set_property(CACHE PINPOOL_WITH_UCX PROPERTY STRINGS AUTO ON OFF)
set_property(CACHE PINPOOL_WITH_FABRIC PROPERTY STRINGS AUTO ON OFF)

# pinpool_provider(NAME <ucx|fabric> MODULE <pkg-config module> PACKAGE <Debian package>
#                SWITCH <cache var> PREFIX <pkg-config prefix> SOURCES ...)
# Defines pinpool_<NAME> when the module is found (or fails when the switch is ON).
function(pinpool_provider)
  cmake_parse_arguments(E "" "NAME;MODULE;PACKAGE;SWITCH;PREFIX" "SOURCES;EXPORTS" ${ARGN})
  set(mode "${${E_SWITCH}}")
  string(TOUPPER "${mode}" mode)
  if(mode STREQUAL "OFF")
    message(STATUS "pinpool: libpinpool_${E_NAME} not built (${E_SWITCH}=OFF)")
    return()
  endif()
  if(mode STREQUAL "ON")
    pkg_check_modules(${E_PREFIX} REQUIRED IMPORTED_TARGET ${E_MODULE})
  else()
    pkg_check_modules(${E_PREFIX} QUIET IMPORTED_TARGET ${E_MODULE})
  endif()
  if(NOT ${E_PREFIX}_FOUND)
    message(STATUS "pinpool: libpinpool_${E_NAME} not built: pkg-config finds no ${E_MODULE} "
                   "(Debian: ${E_PACKAGE}); set ${E_SWITCH}=ON to require it")
    return()
  endif()
  set(target pinpool_${E_NAME})
  add_library(${target} SHARED ${E_SOURCES})
  add_library(pinpool::${E_NAME} ALIAS ${target})
  target_compile_options(${target} PRIVATE -Wall -Wextra -fno-semantic-interposition
                         $<$<BOOL:${PINPOOL_WERROR}>:-Werror>)
  # Only what include/pinpool/<provider>.h declares with PINPOOL_EXPORT is exported, in the
  # version node PINPOOL_<PROVIDER>_<ABI> (cmake/libpinpool_provider.map.in): the names its
  # header declares start with the prefixes E_EXPORTS lists.
  set(PINPOOL_PROVIDER ${E_NAME})
  string(TOUPPER ${E_NAME} PINPOOL_PROVIDER_UPPER)
  list(JOIN E_EXPORTS ", " PINPOOL_PROVIDER_PATTERNS)
  set(PINPOOL_PROVIDER_MANGLED_LINES "")
  set(PINPOOL_PROVIDER_CXX_LINES "")
  foreach(prefix IN LISTS E_EXPORTS)
    string(APPEND PINPOOL_PROVIDER_MANGLED_LINES
           "    _ZT[VIS]N7pinpool${PINPOOL_ABI_MANGLED}[0-9]${prefix}*;\n"
           "    _ZT[VIS]N7pinpool${PINPOOL_ABI_MANGLED}[0-9][0-9]${prefix}*;\n")
    string(APPEND PINPOOL_PROVIDER_CXX_LINES "      pinpool::${PINPOOL_ABI_NAMESPACE}::${prefix}*;\n")
  endforeach()
  string(REGEX REPLACE "\n$" "" PINPOOL_PROVIDER_MANGLED_LINES "${PINPOOL_PROVIDER_MANGLED_LINES}")
  string(REGEX REPLACE "\n$" "" PINPOOL_PROVIDER_CXX_LINES "${PINPOOL_PROVIDER_CXX_LINES}")
  set(map ${PROJECT_BINARY_DIR}/libpinpool_${E_NAME}.map)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/libpinpool_provider.map.in ${map} @ONLY)
  set_target_properties(${target} PROPERTIES
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LINK_DEPENDS ${map})
  target_link_options(${target} PRIVATE "LINKER:--version-script=${map}")
  # The provider is public: pinpool/ucx.h and pinpool/fabric.h include its headers.
  target_link_libraries(${target} PUBLIC pinpool PkgConfig::${E_PREFIX}
                        PRIVATE absl::str_format absl::strings absl::synchronization)
  if(NOT (PINPOOL_SANITIZE AND CMAKE_CXX_COMPILER_ID MATCHES "Clang"))
    target_link_options(${target} PRIVATE "LINKER:--no-undefined")
  endif()
  set_target_properties(${target} PROPERTIES
    VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
    EXPORT_NAME ${E_NAME})
  message(STATUS "pinpool: building libpinpool_${E_NAME} with ${E_MODULE} ${${E_PREFIX}_VERSION}")
endfunction()

pinpool_provider(NAME ucx MODULE ucx PACKAGE libucx-dev SWITCH PINPOOL_WITH_UCX PREFIX PINPOOL_UCX
  EXPORTS Ucx ToUcxPeerBlock
  SOURCES ${PROJECT_SOURCE_DIR}/src/providers/ucx/domain.cc
          ${PROJECT_SOURCE_DIR}/src/providers/ucx/transfer.cc)
pinpool_provider(NAME fabric MODULE libfabric PACKAGE libfabric-dev SWITCH PINPOOL_WITH_FABRIC PREFIX PINPOOL_FABRIC
  EXPORTS Fabric ToFabricRemote DescribeGrants
  SOURCES ${PROJECT_SOURCE_DIR}/src/providers/fabric/domain.cc
          ${PROJECT_SOURCE_DIR}/src/providers/fabric/transfer.cc
          ${PROJECT_SOURCE_DIR}/src/providers/fabric/remote_access.cc)
