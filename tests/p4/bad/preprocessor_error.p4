// expect: 5:2: error: TARGET must be defined
// #error stops the preprocessor.
#include <core.p4>
#ifndef TARGET
#error TARGET must be defined
#endif
