/* Compiled as strict C99 (-pedantic -Werror) only to prove pinpool/pinpool_c.h is valid C99. */
#include "pinpool/pinpool_c.h"

size_t pinpool_c99_header_check(void) { return sizeof(pinpool_options_t) + sizeof(pinpool_keys_t); }
