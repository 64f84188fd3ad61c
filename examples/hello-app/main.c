#include <stdio.h>
#include "hello.h"
int main(void) { puts(hello()); return 0; }
