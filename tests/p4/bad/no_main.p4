// expect: 1:1: error: no package instance named 'main'
// A program without a package instance.
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; }
