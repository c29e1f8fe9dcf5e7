/* A small C program with tabs, braces and operators. */
#include <stdio.h>

static int add(int a, int b) { return a + b; }

int main(int argc, char **argv)
{
	for (int i = 0; i < argc; i++) {
		if (argv[i][0] == '-' && argv[i][1] != '\0')
			printf("option %d: %s\n", i, argv[i]);
	}
	int x = add(0x1F, 017) << 2 >> 1; x ^= ~x | (x & 0xff); x += x++ + ++x;
	return x != 0 ? 1 : 0;   
}
