/* SPDX-License-Identifier: Apache-2.0 */
/* The store master-call fixture (store_mc_fixture.h). */
#include <string.h>

#include <CUnit/CUnit.h>

#include "store_mc_fixture.h"
#include "tide_ut.h"

struct tide_mc_server *
store_mc_fixture_server(bool leases, uint32_t lease_share)
{
	struct tide_mc_server_opts o;
	struct tide_mc_server *srv = NULL;

	tide_mc_server_opts_init(&o, sizeof(o));
	o.rpc_address = "127.0.0.1";
	o.rpc_port = 0;
	o.rpc_thread_num = 1;
	o.enable_metrics = false;
	o.tick_ms = 10;
	o.no_tide_ext = !leases;
	if (lease_share != 0)
		o.table.lease_seg_share = lease_share;
	return tide_mc_server_create(&o, &srv) == 0 ? srv : NULL;
}

void
store_mc_fixture_mount_as(struct store_mc *mc, const char *name, uint64_t id_first, uint64_t base,
			  uint64_t size)
{
	static char tcp[] = "tcp";
	struct tide_mc_segment seg = {.base = base, .size = size};
	struct tide_mc_pool_conn *m;
	int32_t ec = -1;
	int rc;

	seg.id.first = id_first;
	seg.name = (struct tide_mc_str){(char *)name, strlen(name)};
	seg.te_endpoint = seg.name;
	seg.protocol = (struct tide_mc_str){tcp, sizeof(tcp) - 1};
	m = tide_mc_pool_get(&mc->pool, 0, &rc);
	CU_ASSERT_PTR_NOT_NULL_FATAL(m);
	TIDE_UT_OK(tide_mc_client_mount(m->c, &seg, &mc->client_id, &ec));
	CU_ASSERT_EQUAL(ec, 0);
	tide_mc_pool_put(m);
}

void
store_mc_fixture_mount(struct store_mc *mc, uint64_t base, uint64_t size)
{
	store_mc_fixture_mount_as(mc, STORE_MC_FIXTURE_SEG_NAME, 0xabc, base, size);
}
