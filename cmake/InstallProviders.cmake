# Install rules of the optional provider libraries (cmake/Providers.cmake), included at the end of
# cmake/Install.cmake. For each provider that was built (target pinpool_ucx / pinpool_fabric):
#   ${LIBDIR}/libpinpool_<e>.so*, ${INCLUDEDIR}/pinpool/<header>.h,
#   ${LIBDIR}/cmake/pinpool/pinpool_<e>Targets*.cmake   (the CMake package's component <e>),
#   ${LIBDIR}/pkgconfig/pinpool-<e>.pc                   (Requires: pinpool and the provider)
# all in the install component pinpool_<E> (pinpool_Ucx, pinpool_Fabric).
#
# The core package stays independent of them: pinpoolConfig.cmake loads a component's targets
# (and looks for its provider with pkg-config) only when find_package names that component, and
# pinpool.pc does not mention the providers. An provider that was not built installs nothing, and
# asking for its component then fails with the reason.

function(pinpool_install_provider name header module component)
  if(NOT TARGET pinpool_${name})
    return()
  endif()
  install(TARGETS pinpool_${name}
    EXPORT pinpool_${name}Targets
    LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT ${component}
    ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT ${component}
    RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}" COMPONENT ${component})
  install(FILES "${PROJECT_SOURCE_DIR}/include/pinpool/${header}"
    DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/pinpool" COMPONENT ${component})
  install(EXPORT pinpool_${name}Targets
    NAMESPACE pinpool::
    DESTINATION "${PINPOOL_INSTALL_CMAKEDIR}"
    COMPONENT ${component})
  # pinpool-<name>.pc, written at install time for the same reason as pinpool.pc.
  install(CODE "
    set(PINPOOL_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
    set(PINPOOL_PC_LIBDIR \"${PINPOOL_PC_LIBDIR}\")
    set(PINPOOL_PC_INCLUDEDIR \"${PINPOOL_PC_INCLUDEDIR}\")
    set(PINPOOL_PC_VERSION \"${PROJECT_VERSION}\")
    set(PINPOOL_PC_PROVIDER \"${name}\")
    set(PINPOOL_PC_MODULE \"${module}\")
    string(MD5 pinpool_pc_key \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}-${name}\")
    set(pinpool_pc \"${CMAKE_CURRENT_BINARY_DIR}/pkgconfig/\${pinpool_pc_key}/pinpool-${name}.pc\")
    configure_file(\"${CMAKE_CURRENT_LIST_DIR}/pinpool-provider.pc.in\" \"\${pinpool_pc}\" @ONLY)
    file(INSTALL DESTINATION \"${pinpool_pc_destination}\" TYPE FILE FILES \"\${pinpool_pc}\")
    get_filename_component(pinpool_pc_dir \"\${pinpool_pc}\" DIRECTORY)
    file(REMOVE_RECURSE \"\${pinpool_pc_dir}\")
  " COMPONENT ${component})
endfunction()

pinpool_install_provider(ucx ucx.h ucx pinpool_Ucx)
pinpool_install_provider(fabric fabric.h libfabric pinpool_Fabric)
