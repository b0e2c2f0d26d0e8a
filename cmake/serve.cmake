# kblaster-serve: the dashboard's HTTP server, beside the kblaster binary. Only this executable
# links cpp-httplib (Debian ships it as the shared library libcpp-httplib.so.0.11, which the GPU
# machine lacks), so `kblaster` itself never depends on it; `kblaster serve` runs this program.
# Debian builds the library with TLS and compression support, which changes the layout of its
# types, so the same definitions apply here (its cpp-httplib.pc lists them).
find_path(HTTPLIB_INCLUDE_DIR httplib.h REQUIRED)
find_library(HTTPLIB_LIBRARY cpp-httplib REQUIRED)
add_executable(kblaster-serve ${PROJECT_SOURCE_DIR}/src/serve/http/server_main.cpp)
target_include_directories(kblaster-serve PRIVATE ${HTTPLIB_INCLUDE_DIR})
target_compile_definitions(kblaster-serve PRIVATE
  CPPHTTPLIB_OPENSSL_SUPPORT CPPHTTPLIB_ZLIB_SUPPORT CPPHTTPLIB_BROTLI_SUPPORT)
target_link_libraries(kblaster-serve PRIVATE kblaster_lib ${HTTPLIB_LIBRARY} OpenSSL::SSL)
target_compile_options(kblaster-serve PRIVATE -Wall -Wextra -Wno-missing-field-initializers)
set_target_properties(kblaster-serve PROPERTIES BUILD_RPATH "$ORIGIN/lib;${CUDAToolkit_LIBRARY_DIR}")

# The pages (web/*.html, *.js, *.css) and the browser libraries from npm (web/package-lock.json:
# uPlot for charts, highlight.js, jsdiff) go to web/ beside the binary; nothing is fetched at run
# time. cmake/dashboard_assets.cmake runs `npm ci` when web/node_modules is missing or older than
# the lockfile; without npm (or without network) the build goes on and the pages show tables
# without charts, highlighting and diffs, saying so.
set(KBLASTER_WEB_SRC ${PROJECT_SOURCE_DIR}/web)
set(KBLASTER_WEB_OUT ${PROJECT_BINARY_DIR}/web)
find_program(KBLASTER_NPM npm)
file(GLOB KBLASTER_WEB_PAGES CONFIGURE_DEPENDS
  ${KBLASTER_WEB_SRC}/*.html ${KBLASTER_WEB_SRC}/*.js ${KBLASTER_WEB_SRC}/*.css)
set(KBLASTER_WEB_STAMP ${PROJECT_BINARY_DIR}/web.stamp)
add_custom_command(
  OUTPUT ${KBLASTER_WEB_STAMP}
  COMMAND ${CMAKE_COMMAND} -DSRC=${KBLASTER_WEB_SRC} -DOUT=${KBLASTER_WEB_OUT}
          -DNPM=${KBLASTER_NPM} -DSTAMP=${KBLASTER_WEB_STAMP}
          -P ${PROJECT_SOURCE_DIR}/cmake/dashboard_assets.cmake
  DEPENDS ${KBLASTER_WEB_PAGES} ${KBLASTER_WEB_SRC}/package.json ${KBLASTER_WEB_SRC}/package-lock.json
          ${PROJECT_SOURCE_DIR}/cmake/dashboard_assets.cmake
  COMMENT "dashboard assets -> ${KBLASTER_WEB_OUT}")
add_custom_target(kblaster-web ALL DEPENDS ${KBLASTER_WEB_STAMP})
add_dependencies(kblaster-serve kblaster-web)

# The build folder travels to the GPU machine as a whole (like libcudart): the HTTP library goes
# beside the binary, found through the RPATH $ORIGIN/lib.
get_filename_component(KBLASTER_HTTPLIB_REAL ${HTTPLIB_LIBRARY} REALPATH)
execute_process(COMMAND objdump -p ${KBLASTER_HTTPLIB_REAL} OUTPUT_VARIABLE httplib_dynamic)
string(REGEX MATCH "SONAME +([^\n ]+)" _ "${httplib_dynamic}")
if(CMAKE_MATCH_1)
  add_custom_command(TARGET kblaster-serve POST_BUILD
    COMMAND ${CMAKE_COMMAND} -E make_directory $<TARGET_FILE_DIR:kblaster-serve>/lib
    COMMAND ${CMAKE_COMMAND} -E copy_if_different ${KBLASTER_HTTPLIB_REAL}
            $<TARGET_FILE_DIR:kblaster-serve>/lib/${CMAKE_MATCH_1})
endif()
