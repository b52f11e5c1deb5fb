#include "testing/check.h"
int main(void) { return CHECK_DONE(); }
