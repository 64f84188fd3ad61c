const char *hello(void);
