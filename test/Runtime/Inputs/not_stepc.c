/* A shared object that is not a stepc module. */
int answer(void) { return 42; }
