/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of pmd/eth/intr_hold.c with a real EAL (--no-huge, no device):
 * nothing works before init; init is idempotent; while held, the interrupt
 * thread runs nothing else (an EAL alarm, which runs there, waits); after
 * leave it runs at once; sync costs three visits; a hold asked for on the
 * interrupt thread itself is refused with -EDEADLK rather than deadlocking.
 */
#include <errno.h>
#include <stdatomic.h>
#include <unistd.h>

#include <rte_alarm.h>

#include "intr_hold.h"
#include "tide_eth.h"
#include "tide_ut.h"

static atomic_int alarm_ran;
static atomic_int from_intr_rc = 1;

static void
mark_alarm(void *arg)
{
	(void)arg;
	atomic_store(&alarm_ran, 1);
}

static void
enter_from_intr(void *arg)
{
	(void)arg;
	atomic_store(&from_intr_rc, tide_intr_hold_enter(100));
}

static bool
wait_flag(atomic_int *f, int want, double seconds)
{
	double end = tide_ut_now_s() + seconds;

	while (atomic_load(f) != want && tide_ut_now_s() < end)
		usleep(200);
	return atomic_load(f) == want;
}

static void
test_before_init(void)
{
	CU_ASSERT_EQUAL(tide_intr_hold_enter(10), -ENODEV);
	CU_ASSERT_EQUAL(tide_intr_hold_sync(10), -ENODEV);
	CU_ASSERT_EQUAL(tide_intr_hold_visits(), 0);
}

static void
test_init_idempotent(void)
{
	struct tide_eal_opts o = {.prog = "intr_hold_ut",
				  .file_prefix = "tide-intr-hold-ut",
				  .huge = TIDE_EAL_HUGE_OFF,
				  .mem_bytes = 64u << 20};

	CU_ASSERT_FATAL(tide_eal_init(&o, NULL) == 0);
	TIDE_UT_OK(tide_intr_hold_init());
	TIDE_UT_OK(tide_intr_hold_init());
}

static void
test_hold_blocks_other_callbacks(void)
{
	uint64_t v0 = tide_intr_hold_visits();

	TIDE_UT_OK(tide_intr_hold_enter(2000));
	CU_ASSERT_EQUAL(tide_intr_hold_visits(), v0 + 1);
	atomic_store(&alarm_ran, 0);
	TIDE_UT_OK(rte_eal_alarm_set(1, mark_alarm, NULL));
	usleep(50000);
	CU_ASSERT_EQUAL(atomic_load(&alarm_ran), 0); /* parked: the alarm waits */
	tide_intr_hold_leave();
	CU_ASSERT_TRUE(wait_flag(&alarm_ran, 1, 5.0));
	/* Holds do not nest but follow one another. */
	TIDE_UT_OK(tide_intr_hold_enter(2000));
	tide_intr_hold_leave();
}

static void
test_sync_is_three_visits(void)
{
	uint64_t v0 = tide_intr_hold_visits();

	TIDE_UT_OK(tide_intr_hold_sync(2000));
	CU_ASSERT(tide_intr_hold_visits() >= v0 + 3);
}

static void
test_enter_on_interrupt_thread_refused(void)
{
	TIDE_UT_OK(rte_eal_alarm_set(1, enter_from_intr, NULL));
	CU_ASSERT_TRUE(wait_flag(&from_intr_rc, -EDEADLK, 5.0));
	/* And the thread is still free. */
	TIDE_UT_OK(tide_intr_hold_sync(2000));
	tide_eal_fini();
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("pmd_eth_intr_hold", NULL, NULL);

	CU_add_test(s, "before_init", test_before_init);
	CU_add_test(s, "init_idempotent", test_init_idempotent);
	CU_add_test(s, "hold_blocks_other_callbacks", test_hold_blocks_other_callbacks);
	CU_add_test(s, "sync_is_three_visits", test_sync_is_three_visits);
	CU_add_test(s, "enter_on_interrupt_thread_refused", test_enter_on_interrupt_thread_refused);
}

TIDE_UT_MAIN(register_tests)
