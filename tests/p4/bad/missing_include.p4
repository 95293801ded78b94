// expect: 4:10: error: no_such_file.p4: No such file or directory
// An include file that does not exist.
#include <core.p4>
#include "no_such_file.p4"
