// expect: 4:8: unsupported: generic structs are not supported
// Generic structs are valid P4 but not supported by p4sim.
#include <core.p4>
struct pair_t<T> { T a; T b; }
