# `cpack` (or `cmake --build <dir> --target package`) builds a Debian package with kvlab and
# kvlab-gui, the desktop entry, the icon and the documentation. The model and GPU catalogues are
# compiled into the programs, so no data files are needed beside them. Runtime dependencies come
# from dpkg-shlibdeps, so the package asks for exactly the libraries the binaries link. Build the
# package with -DKVLAB_CUDA=OFF (scripts/package_test.sh does): a CUDA build links the CUDA
# toolkit's libraries, which no Debian package provides.
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}
        FILES_MATCHING PATTERN "*.md")

set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "kvlab")
set(CPACK_PACKAGE_VENDOR "kvlab")
set(CPACK_PACKAGE_CONTACT "kvlab developers <kvlab@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Desktop lab and capacity planner for LLM key/value-cache compression")
set(CPACK_PACKAGE_DESCRIPTION
    "kvlab compresses captured or synthetic LLM KV caches with real quantizers, entropy coders and
eviction policies, shows what each costs and keeps, stores every run in SQLite, and turns the
measurements into GPU capacity plans. kvlab is the command line; kvlab-gui the Qt 6 desktop app.")
set(CPACK_PACKAGE_INSTALL_DIRECTORY "kvlab")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION "science")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_STRIP_FILES ON)
include(CPack)
