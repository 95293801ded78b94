// expect: 4:24: error: 'bogus_t' is not a declared type
// A field whose type nobody declared.
#include <core.p4>
header h_t { bit<8> a; bogus_t b; }
