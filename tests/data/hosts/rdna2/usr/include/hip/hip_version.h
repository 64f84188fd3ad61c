// hand-made stand-in for Debian's libamdhip64-dev header
#define HIP_VERSION_MAJOR 5
#define HIP_VERSION_MINOR 2
