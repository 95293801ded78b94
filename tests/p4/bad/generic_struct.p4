// expect: 5:19: error: struct 'pair_t' takes 1 type arguments, got 2
// A generic struct used with the wrong number of type arguments.
#include <core.p4>
struct pair_t<T> { T a; T b; }
struct metadata { pair_t<bit<8>, bit<8>> p; }
