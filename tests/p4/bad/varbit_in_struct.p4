// expect: 5:35: unsupported: varbit field 'v' in struct 's_t' is not supported
// A varbit field outside a header.
#include <core.p4>
#include <v1model.p4>
struct s_t { bit<8> x; varbit<16> v; }
