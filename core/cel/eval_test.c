#include "cel/test_internal.h"
#include "testing/check.h"

int main(int argc, char **argv) {
  if (argc > 1) {
    for (int i = 1; i < argc; i++) printf("%s => %s\n", argv[i], eval_text(argv[i]));
    return 0;
  }
  return CHECK_DONE();
}
