/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tide-net-bench: Tide's user-space TCP over net_memif against Linux kernel
 * TCP over loopback, same message pattern, same run.
 *
 * The coordinator (this process) never initialises DPDK: for every pair it
 * forks a server and a client endpoint, each of which brings up its own EAL
 * (own --file-prefix, memif socket in a temp dir) or kernel sockets, pinned
 * to its own CPU. Endpoints report per-row results over a socketpair.
 * Systems alternate within each repetition so a noisy neighbour hits both.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "net_bench.h"
#include "tide_lcore.h"
#include "tide_log.h"
#include "tide_nodeenv.h"

#define MAX_REPEAT  15
#define MAX_METRICS (3 * NB_MAX_ROWS)

/* Every Tide system before SYS_KERNEL (ratio columns). */
enum { SYS_TIDE, SYS_TIDE_ADAPTIVE, SYS_TIDE_ELIDE, SYS_KERNEL, NSYS };
static const char *const sys_name[NSYS] = {"tide", "tide-adaptive", "tide-elide", "kernel"};
static const char *const ratio_name[SYS_KERNEL] = {"ratio", "ratio-ad", "ratio-el"};

struct pair_result {
	bool ok;
	int huge;
	double others_cpu; /* CPU seconds used by other processes during the pair, per second */
	struct nb_row_result cli[NB_MAX_ROWS], srv[NB_MAX_ROWS];
	int cli_status, srv_status;
};

struct opts {
	double duration, warmup;
	unsigned repeat, flows, mtu;
	uint32_t sockbuf, rto_min_us;
	uint32_t sizes[4], pp_sizes[4];
	unsigned nsizes, npp;
	bool quick, adaptive, zc, elide, sys_on[NSYS];
	const char *report, *cpus;
};

static struct nb_row rows[NB_MAX_ROWS];
static unsigned nrows;
static struct pair_result results[NSYS][MAX_REPEAT];

/* A message or buffer size in the one size syntax (tide_nodeenv_parse_size), 1 B..1 GiB. */
static int
parse_size(const char *s, uint32_t *out)
{
	uint64_t v;

	if (tide_nodeenv_parse_size(s, &v) != 0 || v == 0 || v > (1ull << 30))
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

static int
parse_list(const char *s, uint32_t *out, unsigned max, unsigned *n)
{
	char buf[256], *save = NULL, *tok;

	snprintf(buf, sizeof(buf), "%s", s);
	*n = 0;
	for (tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
		if (*n == max || parse_size(tok, &out[*n]) != 0)
			return -EINVAL;
		(*n)++;
	}
	return *n > 0 ? 0 : -EINVAL;
}

static void
size_name(uint32_t v, char *buf, size_t len)
{
	if (v >= (1u << 20) && v % (1u << 20) == 0)
		snprintf(buf, len, "%uMiB", v >> 20);
	else if (v >= 1024 && v % 1024 == 0)
		snprintf(buf, len, "%uKiB", v >> 10);
	else
		snprintf(buf, len, "%uB", v);
}

/* Busy and total jiffies of the whole machine. */
static void
cpu_jiffies(uint64_t *busy, uint64_t *total)
{
	unsigned long long v[8] = {0};
	FILE *f = fopen("/proc/stat", "r");

	*busy = *total = 0;
	if (f == NULL)
		return;
	if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
		   &v[4], &v[5], &v[6], &v[7]) == 8) {
		for (int i = 0; i < 8; i++)
			*total += v[i];
		*busy = *total - v[3] - v[4];
	}
	fclose(f);
}

static double
tv_s(struct timeval tv)
{
	return (double)tv.tv_sec + tv.tv_usec / 1e6;
}

static pid_t
spawn(int sys, const struct opts *o, struct nb_cfg *cfg, bool server, int *ctl)
{
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return -1;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		int rc;

		close(sv[0]);
		cfg->ctl = sv[1];
		cfg->adaptive = sys == SYS_TIDE_ADAPTIVE;
		cfg->elide = sys == SYS_TIDE_ELIDE;
		rc = sys == SYS_KERNEL ? nb_run_kernel(cfg, server) : nb_run_tide(cfg, server);
		fflush(NULL);
		_exit(rc == 0 ? 0 : 1);
	}
	(void)o;
	close(sv[1]);
	*ctl = sv[0];
	return pid;
}

static int
reap(pid_t pid, int timeout_ms, struct rusage *ru)
{
	int st = 0;

	for (int t = 0; t < timeout_ms; t += 10) {
		pid_t r = wait4(pid, &st, WNOHANG, ru);

		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		usleep(10000);
	}
	kill(pid, SIGKILL);
	wait4(pid, &st, 0, ru);
	return -1;
}

/* Wait for one message of the given type (others are bookkeeping). */
static int
expect(int fd, uint32_t type, struct nb_ctl_msg *m, int timeout_ms)
{
	int rc = nb_ctl_recv(fd, m, timeout_ms);

	if (rc == 0 && m->type != type)
		rc = -EPROTO;
	return rc;
}

static void
run_pair(int sys, const struct opts *o, const int *cpus, unsigned ncpus, struct pair_result *pr)
{
	static struct nb_ctl_msg m;
	char dir[] = "/tmp/tide-net-bench.XXXXXX";
	struct nb_cfg cfg = {0};
	struct rusage ru_s = {0}, ru_c = {0};
	uint64_t b0, t0, b1, t1, w0 = nb_now_ns();
	double expected = 0;
	pid_t srv, cli = -1;
	int sfd, cfd = -1, rs, rc;

	memset(pr, 0, sizeof(*pr));
	pr->cli_status = pr->srv_status = -1;
	for (unsigned i = 0; i < nrows; i++)
		expected += o->warmup + o->duration + 0.5;
	if (mkdtemp(dir) == NULL) {
		perror("tide-net-bench: mkdtemp");
		return;
	}
	cfg.rows = rows;
	cfg.nrows = nrows;
	cfg.warmup_s = o->warmup;
	cfg.duration_s = o->duration;
	cfg.mtu = o->mtu;
	cfg.sockbuf = o->sockbuf;
	cfg.rto_min_us = o->rto_min_us;
	cfg.zc = o->zc;
	cfg.dir = dir;
	cfg.deadline = nb_now_ns() + (uint64_t)((2 * expected + 60) * 1e9);
	cpu_jiffies(&b0, &t0);

	/* The server first: it is the memif server, which must exist before its client. */
	cfg.cpu = cpus[0];
	srv = spawn(sys, o, &cfg, true, &sfd);
	if (srv < 0)
		goto out;
	rc = expect(sfd, NB_CTL_READY, &m, 60000);
	if (rc != 0) {
		fprintf(stderr, "tide-net-bench: %s server did not start: %s\n", sys_name[sys],
			strerror(-rc));
		goto out_srv;
	}
	pr->huge = m.huge;
	cfg.port = (uint16_t)m.port;
	cfg.cpu = cpus[ncpus > 1 ? 1 : 0];
	cli = spawn(sys, o, &cfg, false, &cfd);
	if (cli < 0)
		goto out_srv;
	rc = expect(cfd, NB_CTL_READY, &m, 60000);
	if (rc == 0)
		rc = expect(cfd, NB_CTL_RESULT, &m, (int)((2 * expected + 90) * 1000));
	if (rc == 0) {
		pr->cli_status = m.status;
		memcpy(pr->cli, m.res, sizeof(pr->cli));
		rc = expect(cfd, NB_CTL_QUIESCED, &m, 30000);
	}
	if (rc != 0) {
		fprintf(stderr, "tide-net-bench: %s client: %s\n", sys_name[sys], strerror(-rc));
		goto out_srv; /* the server is killed below; nobody polls memif any more */
	}
	rc = expect(sfd, NB_CTL_RESULT, &m, 30000);
	if (rc == 0) {
		pr->srv_status = m.status;
		memcpy(pr->srv, m.res, sizeof(pr->srv));
		rc = expect(sfd, NB_CTL_QUIESCED, &m, 30000);
	}
	if (rc != 0)
		fprintf(stderr, "tide-net-bench: %s server: %s\n", sys_name[sys], strerror(-rc));
	/* Phase two: both stopped polling; now either may remove its memif end. */
	m.type = NB_CTL_GO;
	nb_ctl_send(cfd, &m);
	nb_ctl_send(sfd, &m);
out_srv:
	if (cli > 0 && (rs = reap(cli, 30000, &ru_c)) != 0) {
		fprintf(stderr, "tide-net-bench: %s client exited with status %d\n", sys_name[sys],
			rs);
		pr->cli_status = pr->cli_status != 0 ? pr->cli_status : -EIO;
	}
	if (cli <= 0 || pr->cli_status != 0 || pr->srv_status == -1) {
		kill(srv, SIGKILL);
		reap(srv, 5000, &ru_s);
	} else if ((rs = reap(srv, 30000, &ru_s)) != 0) {
		fprintf(stderr, "tide-net-bench: %s server exited with status %d\n", sys_name[sys],
			rs);
		pr->srv_status = pr->srv_status != 0 ? pr->srv_status : -EIO;
	}
	if (cfd >= 0)
		close(cfd);
	close(sfd);
out:
	cpu_jiffies(&b1, &t1);
	{
		double wall = (double)(nb_now_ns() - w0) / 1e9;
		double hz = (double)sysconf(_SC_CLK_TCK);
		double ours = tv_s(ru_s.ru_utime) + tv_s(ru_s.ru_stime) + tv_s(ru_c.ru_utime) +
			      tv_s(ru_c.ru_stime);
		double all = (double)(b1 - b0) / hz;

		pr->others_cpu = wall > 0 ? (all - ours) / wall : 0;
		if (pr->others_cpu < 0)
			pr->others_cpu = 0;
	}
	pr->ok = pr->cli_status == 0 && pr->srv_status == 0;
	if (!pr->ok)
		fprintf(stderr, "tide-net-bench: %s: client status %d, server status %d\n",
			sys_name[sys], pr->cli_status, pr->srv_status);
	for (unsigned i = 0; i < nrows; i++) {
		const struct nb_row_result *c = &pr->cli[i], *s = &pr->srv[i];

		/* --quick (the CI smoke run) measures 0.2 s windows: a stream row whose
		 * acknowledgments all landed outside the window has no goodput figure
		 * but still verified its bytes, which is what the smoke run checks. */
		bool no_msgs = c->msgs == 0 && !(o->quick && rows[i].kind == NB_STREAM);

		if (!c->ran || c->error != 0 || c->bad != 0 || s->bad != 0 || c->verified == 0 ||
		    no_msgs || (rows[i].kind == NB_STREAM && s->verified < c->verified)) {
			fprintf(stderr,
				"tide-net-bench: %s row %u failed: error %d, verified %" PRIu64
				"/%" PRIu64 " bytes, bad %" PRIu64 "/%" PRIu64 ", %" PRIu64
				" messages\n",
				sys_name[sys], i, c->error, c->verified, s->verified, c->bad,
				s->bad, c->msgs);
			pr->ok = false;
		}
	}
	rmdir(dir);
	(void)t0;
	(void)t1;
}

/* ---- report ---- */

struct metric {
	char name[48];
	const char *unit;
	bool higher_better;
	unsigned row;
	int what; /* 0 goodput Gbit/s, 1 CPU s/GB, 2 msg/s, 3 p50 us, 4 p99 us */
};

static double
metric_value(const struct metric *mt, const struct pair_result *pr)
{
	const struct nb_row_result *c = &pr->cli[mt->row], *s = &pr->srv[mt->row];

	if (!pr->ok || c->window_s <= 0)
		return -1;
	switch (mt->what) {
	case 0:
		return (double)c->bytes * 8 / c->window_s / 1e9;
	case 1:
		return c->bytes > 0 ? (c->cpu_s + s->cpu_s) / ((double)c->bytes / 1e9) : -1;
	case 2:
		return (double)c->msgs / c->window_s;
	case 3:
		return (double)c->p50_ns / 1e3;
	default:
		return (double)c->p99_ns / 1e3;
	}
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Median, best and spread ((max-min)/median) over the successful repeats. */
static bool
summarize(const struct metric *mt, int sys, unsigned repeat, double *med, double *best,
	  double *spread)
{
	double v[MAX_REPEAT];
	unsigned n = 0;

	for (unsigned r = 0; r < repeat; r++) {
		double x = metric_value(mt, &results[sys][r]);

		if (x >= 0)
			v[n++] = x;
	}
	if (n == 0)
		return false;
	qsort(v, n, sizeof(v[0]), cmp_double);
	*med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	*best = mt->higher_better ? v[n - 1] : v[0];
	*spread = *med > 0 ? (v[n - 1] - v[0]) / *med : 0;
	return true;
}

static unsigned
build_metrics(struct metric *mt, unsigned flows)
{
	unsigned n = 0;
	char sz[16];

	(void)flows;
	for (unsigned i = 0; i < nrows; i++) {
		size_name(rows[i].size, sz, sizeof(sz));
		if (rows[i].kind == NB_STREAM) {
			mt[n] = (struct metric){.unit = "Gbit/s", .higher_better = true, .row = i};
			snprintf(mt[n].name, sizeof(mt[n].name), "goodput %s x%u", sz,
				 rows[i].flows);
			n++;
		} else {
			mt[n] = (struct metric){
				.unit = "msg/s", .higher_better = true, .row = i, .what = 2};
			snprintf(mt[n].name, sizeof(mt[n].name), "ping-pong rate %s", sz);
			n++;
			mt[n] = (struct metric){.unit = "us", .row = i, .what = 3};
			snprintf(mt[n].name, sizeof(mt[n].name), "RTT p50 %s", sz);
			n++;
			mt[n] = (struct metric){.unit = "us", .row = i, .what = 4};
			snprintf(mt[n].name, sizeof(mt[n].name), "RTT p99 %s", sz);
			n++;
		}
	}
	for (unsigned i = 0; i < nrows; i++) {
		if (rows[i].kind != NB_STREAM)
			continue;
		size_name(rows[i].size, sz, sizeof(sz));
		mt[n] = (struct metric){.unit = "CPU s/GB", .row = i, .what = 1};
		snprintf(mt[n].name, sizeof(mt[n].name), "CPU/GB %s x%u", sz, rows[i].flows);
		n++;
	}
	return n;
}

static void
fmt_val(char *buf, size_t len, double v, const char *unit)
{
	if (strcmp(unit, "msg/s") == 0)
		snprintf(buf, len, "%.0f", v);
	else if (v >= 100)
		snprintf(buf, len, "%.0f", v);
	else if (v >= 10)
		snprintf(buf, len, "%.1f", v);
	else
		snprintf(buf, len, "%.2f", v);
}

static void
print_table(const struct opts *o, const struct metric *mt, unsigned nm)
{
	int ref = o->sys_on[SYS_KERNEL] ? SYS_KERNEL : -1;

	printf("\n%-24s %-9s", "row", "unit");
	for (int s = 0; s < NSYS; s++)
		if (o->sys_on[s])
			printf(" %22s", sys_name[s]);
	for (int s = 0; s < SYS_KERNEL; s++)
		if (o->sys_on[s] && ref >= 0)
			printf(" %8s", ratio_name[s]);
	printf("\n%-24s %-9s", "", "");
	for (int s = 0; s < NSYS; s++)
		if (o->sys_on[s])
			printf(" %22s", "median (best) +-spr");
	printf("\n");
	for (unsigned i = 0; i < nm; i++) {
		double med[NSYS] = {0}, best, spr;
		bool have[NSYS] = {false};

		printf("%-24s %-9s", mt[i].name, mt[i].unit);
		for (int s = 0; s < NSYS; s++) {
			char a[16], b[16], cell[48];

			if (!o->sys_on[s])
				continue;
			have[s] = summarize(&mt[i], s, o->repeat, &med[s], &best, &spr);
			if (!have[s]) {
				printf(" %22s", "failed");
				continue;
			}
			fmt_val(a, sizeof(a), med[s], mt[i].unit);
			fmt_val(b, sizeof(b), best, mt[i].unit);
			snprintf(cell, sizeof(cell), "%s (%s) %3.0f%%", a, b, spr * 100);
			printf(" %22s", cell);
		}
		for (int s = 0; s < SYS_KERNEL; s++) {
			if (!o->sys_on[s] || ref < 0)
				continue;
			if (have[s] && have[ref] && med[ref] > 0)
				printf(" %8.2f", med[s] / med[ref]);
			else
				printf(" %8s", "-");
		}
		printf("\n");
	}
}

static void
write_report(const struct opts *o, const struct metric *mt, unsigned nm)
{
	FILE *f = fopen(o->report, "w");

	if (f == NULL) {
		fprintf(stderr, "tide-net-bench: %s: %s\n", o->report, strerror(errno));
		return;
	}
	fprintf(f,
		"{\n  \"config\": {\"duration_s\": %g, \"warmup_s\": %g, \"repeat\": %u, "
		"\"flows\": %u, \"mtu\": %u, \"sockbuf\": %u},\n",
		o->duration, o->warmup, o->repeat, o->flows, o->mtu, o->sockbuf);
	fprintf(f, "  \"runs\": {");
	for (int s = 0, first = 1; s < NSYS; s++) {
		if (!o->sys_on[s])
			continue;
		fprintf(f, "%s\n    \"%s\": [", first ? "" : ",", sys_name[s]);
		first = 0;
		for (unsigned r = 0; r < o->repeat; r++)
			fprintf(f, "%s{\"ok\": %s, \"hugepages\": %s, \"others_cpu\": %.3f}",
				r ? ", " : "", results[s][r].ok ? "true" : "false",
				results[s][r].huge ? "true" : "false", results[s][r].others_cpu);
		fprintf(f, "]");
	}
	fprintf(f, "\n  },\n  \"rows\": [");
	for (unsigned i = 0; i < nm; i++) {
		fprintf(f, "%s\n    {\"name\": \"%s\", \"unit\": \"%s\"", i ? "," : "", mt[i].name,
			mt[i].unit);
		for (int s = 0; s < NSYS; s++) {
			double med, best, spr;

			if (!o->sys_on[s])
				continue;
			fprintf(f, ", \"%s\": {\"values\": [", sys_name[s]);
			for (unsigned r = 0; r < o->repeat; r++)
				fprintf(f, "%s%.6g", r ? ", " : "",
					metric_value(&mt[i], &results[s][r]));
			if (summarize(&mt[i], s, o->repeat, &med, &best, &spr))
				fprintf(f, "], \"median\": %.6g, \"best\": %.6g, \"spread\": %.4f}",
					med, best, spr);
			else
				fprintf(f,
					"], \"median\": null, \"best\": null, \"spread\": null}");
		}
		fprintf(f, "}");
	}
	fprintf(f, "\n  ]\n}\n");
	fclose(f);
	printf("report written to %s\n", o->report);
}

static void
usage(FILE *f)
{
	fprintf(f,
		"usage: tide-net-bench [--duration S] [--warmup S] [--repeat N] [--flows N]\n"
		"                      [--sizes 64k,1m] [--pp-sizes 64,4k] [--mtu M] "
		"[--sockbuf SIZE]\n"
		"                      [--adaptive] [--elide] [--zc] [--only tide|kernel] "
		"[--cpus LIST]\n"
		"                      [--quick] [--report FILE]\n"
		"Tide's user-space TCP over net_memif vs Linux TCP over loopback; two processes,\n"
		"one polling CPU each. Exit status 0 only if every byte was verified.\n"
		"--zc: Tide sends messages of 4 KiB and more with tide_net_send_zc (frames\n"
		"reference the pattern instead of copying it into the send buffer).\n"
		"--elide: also run tide-elide, Tide with TIDE_CSUM=elide on both memif ends\n"
		"(no checksum computed or verified), beside tide (TIDE_CSUM=auto: software\n"
		"checksums, memif has no offloads), alternating within each repetition.\n");
}

int
main(int argc, char **argv)
{
	static const struct option lopts[] = {{"duration", required_argument, NULL, 'd'},
					      {"warmup", required_argument, NULL, 'w'},
					      {"repeat", required_argument, NULL, 'r'},
					      {"flows", required_argument, NULL, 'f'},
					      {"sizes", required_argument, NULL, 's'},
					      {"pp-sizes", required_argument, NULL, 'p'},
					      {"mtu", required_argument, NULL, 'm'},
					      {"sockbuf", required_argument, NULL, 'b'},
					      {"adaptive", no_argument, NULL, 'a'},
					      {"zc", no_argument, NULL, 'z'},
					      {"elide", no_argument, NULL, 'e'},
					      {"rto-min-us", required_argument, NULL, 'T'},
					      {"only", required_argument, NULL, 'o'},
					      {"cpus", required_argument, NULL, 'c'},
					      {"quick", no_argument, NULL, 'q'},
					      {"report", required_argument, NULL, 'R'},
					      {"help", no_argument, NULL, 'h'},
					      {NULL, 0, NULL, 0}};
	struct opts o = {.duration = 2.0,
			 .warmup = 0.5,
			 .repeat = 3,
			 .flows = 8,
			 .mtu = 9000,
			 .sockbuf = 4u << 20,
			 .sizes = {64 << 10, 1 << 20},
			 .nsizes = 2,
			 .pp_sizes = {64, 4096},
			 .npp = 2};
	struct metric mt[MAX_METRICS];
	int cpus[TIDE_LCORE_MAX], c, status = 0;
	unsigned ncpus = 0, nm;
	bool dur_set = false, rep_set = false, warm_set = false;
	const char *only = NULL;

	while ((c = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
		switch (c) {
		case 'd':
			o.duration = strtod(optarg, NULL);
			dur_set = true;
			break;
		case 'w':
			o.warmup = strtod(optarg, NULL);
			warm_set = true;
			break;
		case 'r':
			o.repeat = (unsigned)strtoul(optarg, NULL, 10);
			rep_set = true;
			break;
		case 'f':
			o.flows = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 's':
			if (parse_list(optarg, o.sizes, 4, &o.nsizes) != 0)
				goto bad;
			break;
		case 'p':
			if (parse_list(optarg, o.pp_sizes, 4, &o.npp) != 0)
				goto bad;
			break;
		case 'm':
			o.mtu = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'b':
			if (parse_size(optarg, &o.sockbuf) != 0)
				goto bad;
			break;
		case 'a':
			o.adaptive = true;
			break;
		case 'z':
			o.zc = true;
			break;
		case 'e':
			o.elide = true;
			break;
		case 'T':
			o.rto_min_us = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'o':
			only = optarg;
			break;
		case 'c':
			o.cpus = optarg;
			break;
		case 'q':
			o.quick = true;
			break;
		case 'R':
			o.report = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			goto bad;
		}
	}
	if (o.quick) {
		o.duration = dur_set ? o.duration : 0.2;
		o.warmup = warm_set ? o.warmup : 0.05;
		o.repeat = rep_set ? o.repeat : 1;
	}
	if (optind != argc || o.duration <= 0 || o.warmup < 0 || o.repeat == 0 ||
	    o.repeat > MAX_REPEAT || o.flows == 0 || o.flows >= NB_MAX_FLOWS || o.mtu < 576 ||
	    o.mtu > 9000 || o.sockbuf < 4096)
		goto bad;
	for (unsigned i = 0; i < o.npp; i++)
		if (o.pp_sizes[i] > NB_PP_MAX)
			goto bad;
	o.sys_on[SYS_TIDE] = only == NULL || strcmp(only, "tide") == 0;
	o.sys_on[SYS_TIDE_ADAPTIVE] = o.adaptive && o.sys_on[SYS_TIDE];
	o.sys_on[SYS_TIDE_ELIDE] = o.elide && o.sys_on[SYS_TIDE];
	o.sys_on[SYS_KERNEL] = only == NULL || strcmp(only, "kernel") == 0;
	if (!o.sys_on[SYS_TIDE] && !o.sys_on[SYS_KERNEL])
		goto bad;

	for (unsigned i = 0; i < o.nsizes; i++) {
		rows[nrows++] = (struct nb_row){NB_STREAM, o.sizes[i], 1};
		if (o.flows > 1)
			rows[nrows++] = (struct nb_row){NB_STREAM, o.sizes[i], o.flows};
	}
	for (unsigned i = 0; i < o.npp; i++)
		rows[nrows++] = (struct nb_row){NB_PINGPONG, o.pp_sizes[i], 1};
	if (nb_pattern_init() != 0)
		return 1;
	/* CPUs are picked here, before any EAL pins a thread: the server gets
	 * the first, the client the second (the same one when only one exists). */
	if (tide_lcore_cpus_pick(o.cpus, 2, cpus, TIDE_LCORE_MAX, &ncpus) != 0) {
		fprintf(stderr, "tide-net-bench: no usable CPUs\n");
		return 1;
	}
	tide_log_set_level(TIDE_LOG_WARN);
	signal(SIGPIPE, SIG_IGN);
	printf("tide-net-bench: %u rows x %u repeats, %.2f s warm-up + %.2f s measured per row; "
	       "server on CPU %d, client on CPU %d; MTU %u (Tide), %u-byte Tide buffers; "
	       "Tide workers %s%s%s\n",
	       nrows, o.repeat, o.warmup, o.duration, cpus[0], cpus[ncpus > 1 ? 1 : 0], o.mtu,
	       o.sockbuf, o.adaptive ? "busy and adaptive" : "busy-poll",
	       o.zc ? ", zero-copy sends" : "",
	       o.elide ? "; tide-elide: checksums elided on both ends" : "");
	fflush(stdout);

	for (unsigned r = 0; r < o.repeat; r++) {
		for (int s = 0; s < NSYS; s++) {
			struct pair_result *pr = &results[s][r];
			uint64_t verified = 0;

			if (!o.sys_on[s])
				continue;
			run_pair(s, &o, cpus, ncpus, pr);
			for (unsigned i = 0; i < nrows; i++)
				verified += pr->srv[i].verified;
			printf("run %u %-13s %s: %" PRIu64 " bytes verified by the server, "
			       "%s, other processes used %.2f CPUs\n",
			       r + 1, sys_name[s], pr->ok ? "ok" : "FAILED", verified,
			       s == SYS_KERNEL ? "loopback"
			       : pr->huge      ? "hugepages"
					       : "no hugepages",
			       pr->others_cpu);
			fflush(stdout);
			if (!pr->ok)
				status = 1;
		}
	}
	nm = build_metrics(mt, o.flows);
	print_table(&o, mt, nm);
	printf("ratio = tide median / kernel median (goodput, rate: > 1 is better; RTT, CPU/GB: "
	       "< 1 is better); ratio-ad and ratio-el the same for tide-adaptive and "
	       "tide-elide.\nTide workers busy-poll: each endpoint burns its whole CPU by "
	       "design, so Tide's CPU/GB is 2 CPUs x window / GB moved.\n");
	if (o.report != NULL)
		write_report(&o, mt, nm);
	return status;
bad:
	usage(stderr);
	return 2;
}
