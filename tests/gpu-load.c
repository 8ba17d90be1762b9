// SPDX-License-Identifier: MIT
/* Placeholder: being written. */
#include "config.h"

#include "gpu-util.h"

static void test_placeholder(void)
{
	gpu_open();
	gpu_close();
}

static const struct ktap_case cases[] = {
	KTAP_CASE(test_placeholder),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
