// expect: 4:31: error: duplicate field 'a' in 'h_t'
// A header with two fields of one name.
#include <core.p4>
header h_t { bit<8> a; bit<8> a; }
