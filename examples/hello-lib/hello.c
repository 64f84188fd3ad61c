const char *hello(void) { return "hello from a stack of my own"; }
