/*
 * writer.c — the writer thread. It alone owns the socket, the output buffer
 * and the per-connection string registry.
 *
 * Loop: connect (non-blocking, bounded by TRACEBRIDGE_CONNECT_TIMEOUT_MS);
 * take records from the ring and encode them into the output buffer, each
 * new string's registry entry (-1 | id | byte length | bytes) just before
 * the first record that uses it, ids from 0 per connection; send the buffer
 * with non-blocking writes; when the ring is empty, sleep up to
 * TRACEBRIDGE_FLUSH_MS (probes wake it when a quarter of the ring fills).
 *
 * When the bridge is unreachable the writer discards what the probes
 * enqueue (counted in dropped_unsent) and retries with exponential back-off
 * between TRACEBRIDGE_RECONNECT_MIN_MS and _MAX_MS. A lost connection drops
 * the records not completely written; the next connection starts a new
 * registry. The first failure of each kind is noted once on stderr.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { SEND_POLL_MS = 50 };

static struct {
	pthread_t thread;
	int started;              /* under the caller's lock (trace.c init_mu) */
	_Atomic int stop;
	_Atomic int done;
	_Atomic int sleeping;
	pthread_mutex_t mu;
	pthread_cond_t wake;
	pthread_cond_t finished;
	_Atomic uint64_t flushed; /* ring position: all before it sent or dropped */

	/* Writer thread only. */
	int fd;
	uint8_t *out;
	size_t out_cap, out_len, out_sent;
	uint32_t *ends;           /* end offset in out of each record */
	size_t nends, ends_sent, ends_cap;
	uint32_t *reg_gen;        /* string handle → connection generation */
	int32_t *reg_id;          /* string handle → registry id */
	uint32_t gen;
	int32_t next_id;
	int64_t next_connect;     /* monotonic ms */
	int backoff;
	int noted_unreachable, noted_lost;
} W = { .fd = -1 };

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void deadline_in(struct timespec *ts, int ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

static void init_sync(void)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_mutex_init(&W.mu, NULL);
	pthread_cond_init(&W.wake, &ca);
	pthread_cond_init(&W.finished, &ca);
	pthread_condattr_destroy(&ca);
}

static int ring_empty(void)
{
	uint64_t pos = atomic_load_explicit(&tb_ring.tail, memory_order_relaxed);
	struct tb_slot *s = &tb_ring.slots[pos & tb_ring.mask];
	return atomic_load_explicit(&s->seq, memory_order_acquire) != pos + 1;
}

void tb_writer_kick(void)
{
	if (atomic_load_explicit(&W.sleeping, memory_order_relaxed)) {
		pthread_mutex_lock(&W.mu);
		pthread_cond_signal(&W.wake);
		pthread_mutex_unlock(&W.mu);
	}
}

/* idle sleeps up to ms or until woken; unless always is set it does not
 * sleep while there is work. A stop request always ends it. */
static void idle(int ms, int always)
{
	if (ms <= 0)
		return;
	struct timespec ts;
	deadline_in(&ts, ms);
	pthread_mutex_lock(&W.mu);
	atomic_store(&W.sleeping, 1);
	if ((always || ring_empty()) && !atomic_load(&W.stop))
		pthread_cond_timedwait(&W.wake, &W.mu, &ts);
	atomic_store(&W.sleeping, 0);
	pthread_mutex_unlock(&W.mu);
}

static void publish_flushed(void)
{
	atomic_store_explicit(&W.flushed, atomic_load_explicit(&tb_ring.tail, memory_order_relaxed),
	                      memory_order_release);
}

/* drop_queued discards everything in the ring (bridge unreachable). */
static void drop_queued(void)
{
	struct tb_rec r;
	uint64_t n = 0;
	while (tb_ring_pop(&r))
		n++;
	if (n)
		tb_inc(&tb_count.dropped_unsent, n);
	publish_flushed();
}

static void disconnect(const char *why, int err)
{
	if (W.fd >= 0) {
		close(W.fd);
		W.fd = -1;
	}
	size_t unsent = W.nends - W.ends_sent;
	if (unsent)
		tb_inc(&tb_count.dropped_unsent, unsent);
	W.out_len = W.out_sent = 0;
	W.nends = W.ends_sent = 0;
	if (!W.noted_lost) {
		W.noted_lost = 1;
		tb_note("connection to %s:%s lost (%s%s%s); reconnecting, records are dropped meanwhile",
		        tb_cfg.host, tb_cfg.port, why, err ? ": " : "", err ? strerror(err) : "");
	}
	W.next_connect = mono_ms() + tb_cfg.reconnect_min_ms;
	W.backoff = tb_cfg.reconnect_min_ms;
	publish_flushed();
}

/* try_connect makes one connection attempt; 0 when connected. */
static int try_connect(void)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL;
	int gai = getaddrinfo(tb_cfg.host, tb_cfg.port, &hints, &res);
	int err = 0;
	const char *why = NULL;
	if (gai != 0) {
		why = gai_strerror(gai);
	}
	for (struct addrinfo *a = res; a != NULL && W.fd < 0; a = a->ai_next) {
		int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
		if (fd < 0) {
			err = errno;
			continue;
		}
		if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
			if (errno != EINPROGRESS) {
				err = errno;
				close(fd);
				continue;
			}
			struct pollfd p = { .fd = fd, .events = POLLOUT };
			int pr;
			do
				pr = poll(&p, 1, tb_cfg.connect_timeout_ms);
			while (pr < 0 && errno == EINTR);
			int soerr = 0;
			socklen_t len = sizeof soerr;
			if (pr == 0)
				soerr = ETIMEDOUT;
			else if (pr < 0)
				soerr = errno;
			else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0)
				soerr = errno;
			if (soerr != 0) {
				err = soerr;
				close(fd);
				continue;
			}
		}
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		W.fd = fd;
	}
	if (res != NULL)
		freeaddrinfo(res);
	if (W.fd >= 0) {
		W.gen++;
		if (W.gen == 0)
			W.gen = 1; /* never equal to the zeroed reg_gen */
		W.next_id = 0;
		W.backoff = tb_cfg.reconnect_min_ms;
		W.noted_lost = 0;
		tb_inc(&tb_count.connects, 1);
		return 0;
	}
	tb_inc(&tb_count.connect_failures, 1);
	if (!W.noted_unreachable) {
		W.noted_unreachable = 1;
		if (why == NULL)
			why = strerror(err ? err : ECONNREFUSED);
		tb_note("cannot connect to %s:%s (%s); records are dropped until it is reachable "
		        "(TRACEBRIDGE_QUIET=1 silences this)", tb_cfg.host, tb_cfg.port, why);
	}
	W.next_connect = mono_ms() + W.backoff;
	W.backoff = W.backoff > tb_cfg.reconnect_max_ms / 2 ? tb_cfg.reconnect_max_ms : W.backoff * 2;
	return -1;
}

/* peer_closed reports whether the bridge closed the connection (it never
 * sends anything; readable means end of stream or an error). */
static int peer_closed(void)
{
	struct pollfd p = { .fd = W.fd, .events = POLLIN | POLLRDHUP };
	if (poll(&p, 1, 0) <= 0)
		return 0;
	if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))
		return 1;
	char sink[512];
	ssize_t n = recv(W.fd, sink, sizeof sink, MSG_DONTWAIT);
	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* encode appends r (and its new registry entries) to the output buffer;
 * -1 when it does not fit. */
static int encode(const struct tb_rec *r)
{
	tb_str_t hs[4];
	int n = tb_rec_strings(r, hs);
	size_t need = tb_frame_size(r->kind);
	for (int i = 0; i < n; i++) {
		if (W.reg_gen[hs[i]] != W.gen)
			need += 12 + tb_string(hs[i])->len;
	}
	if (W.out_len + need > W.out_cap || W.nends == W.ends_cap)
		return -1;
	uint8_t *p = W.out + W.out_len;
	int32_t ids[4];
	for (int i = 0; i < n; i++) {
		tb_str_t h = hs[i];
		if (W.reg_gen[h] != W.gen) {
			const struct tb_string *s = tb_string(h);
			W.reg_gen[h] = W.gen;
			W.reg_id[h] = W.next_id++;
			p = tb_append_entry(p, W.reg_id[h], s->bytes, s->len);
		}
		ids[i] = W.reg_id[h];
	}
	p = tb_append_frame(p, r, ids[0], ids + 1);
	W.out_len = (size_t)(p - W.out);
	W.ends[W.nends++] = (uint32_t)W.out_len;
	return 0;
}

/* fill encodes records from the ring until it is empty or the buffer is
 * full. A record that does not fit stays pending for the next buffer. */
static struct tb_rec pending;
static int have_pending;

static void fill(void)
{
	for (;;) {
		if (!have_pending) {
			if (!tb_ring_pop(&pending))
				return;
			have_pending = 1;
		}
		if (encode(&pending) != 0)
			return;
		have_pending = 0;
	}
}

static void count_sent(void)
{
	size_t k = W.ends_sent;
	while (k < W.nends && W.ends[k] <= W.out_sent)
		k++;
	if (k > W.ends_sent) {
		tb_inc(&tb_count.sent, k - W.ends_sent);
		W.ends_sent = k;
	}
}

/* send_out writes the buffer; 0 when all is written, -1 when the
 * connection failed (already closed). */
static int send_out(void)
{
	while (W.out_sent < W.out_len) {
		ssize_t n = send(W.fd, W.out + W.out_sent, W.out_len - W.out_sent, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			W.out_sent += (size_t)n;
			count_sent();
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd p = { .fd = W.fd, .events = POLLOUT };
			int pr = poll(&p, 1, SEND_POLL_MS);
			if (pr < 0 && errno != EINTR) {
				disconnect("poll", errno);
				return -1;
			}
			if (pr > 0 && (p.revents & (POLLERR | POLLHUP | POLLNVAL))) {
				disconnect("connection closed", 0);
				return -1;
			}
			continue;
		}
		disconnect("write", n < 0 ? errno : 0);
		return -1;
	}
	W.out_len = W.out_sent = 0;
	W.nends = W.ends_sent = 0;
	return 0;
}

static void *run(void *arg)
{
	(void)arg;
	tb_self.busy = 1; /* never record events of this thread */
	W.backoff = tb_cfg.reconnect_min_ms;
	W.next_connect = 0;
	for (;;) {
		int stopping = atomic_load(&W.stop);
		if (W.fd < 0) {
			int64_t now = mono_ms();
			if (now >= W.next_connect)
				try_connect();
			if (W.fd < 0) {
				have_pending = 0;
				drop_queued();
				if (stopping)
					break;
				/* Sleep even while probes enqueue: they are woken
				 * every quarter ring, and what piles up is dropped
				 * on the next round. */
				int64_t wait = W.next_connect - mono_ms();
				idle((int)(wait < tb_cfg.flush_ms ? (wait > 0 ? wait : 0) : tb_cfg.flush_ms), 1);
				continue;
			}
		}
		if (peer_closed()) {
			disconnect("closed by the bridge", 0);
			continue;
		}
		fill();
		if (W.out_len > 0 && send_out() != 0)
			continue;
		if (!have_pending && ring_empty()) {
			publish_flushed();
			if (stopping)
				break;
			idle(tb_cfg.flush_ms, 0);
		}
	}
	if (W.fd >= 0) {
		close(W.fd);
		W.fd = -1;
	}
	pthread_mutex_lock(&W.mu);
	atomic_store(&W.done, 1);
	pthread_cond_broadcast(&W.finished);
	pthread_mutex_unlock(&W.mu);
	return NULL;
}

int tb_writer_start(void)
{
	if (W.started)
		return 0;
	if (W.out == NULL) {
		uint32_t cap = tb_strtab_capacity();
		W.out_cap = 256u << 10;
		size_t worst = 4 * (12 + (size_t)tb_cfg.max_string_len) + 64;
		if (W.out_cap < worst)
			W.out_cap = worst;
		W.ends_cap = W.out_cap / 32 + 1; /* the smallest frame: a SplitEvent */
		W.out = malloc(W.out_cap);
		W.ends = malloc(W.ends_cap * sizeof *W.ends);
		W.reg_gen = calloc(cap, sizeof *W.reg_gen);
		W.reg_id = calloc(cap, sizeof *W.reg_id);
		if (W.out == NULL || W.ends == NULL || W.reg_gen == NULL || W.reg_id == NULL) {
			free(W.out);
			free(W.ends);
			free(W.reg_gen);
			free(W.reg_id);
			W.out = NULL;
			return -1;
		}
		init_sync();
	}
	atomic_store(&W.stop, 0);
	atomic_store(&W.done, 0);
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = tb_real_pthread_create(&W.thread, NULL, run, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		tb_note("cannot start the writer thread: %s", strerror(rc));
		return -1;
	}
	W.started = 1;
	return 0;
}

int tb_writer_running(void)
{
	return W.started && !atomic_load(&W.done);
}

uint64_t tb_writer_flushed(void)
{
	return atomic_load_explicit(&W.flushed, memory_order_acquire);
}

void tb_writer_stop(int timeout_ms)
{
	if (!W.started)
		return;
	struct timespec ts;
	deadline_in(&ts, timeout_ms);
	pthread_mutex_lock(&W.mu);
	atomic_store(&W.stop, 1);
	pthread_cond_signal(&W.wake);
	while (!atomic_load(&W.done)) {
		if (pthread_cond_timedwait(&W.finished, &W.mu, &ts) == ETIMEDOUT)
			break;
	}
	int done = atomic_load(&W.done);
	pthread_mutex_unlock(&W.mu);
	if (done)
		tb_real_pthread_join(W.thread, NULL);
	else
		pthread_detach(W.thread);
	W.started = 0;
}

void tb_writer_atfork_prepare(void)
{
	if (W.out != NULL)
		pthread_mutex_lock(&W.mu);
}

void tb_writer_atfork_parent(void)
{
	if (W.out != NULL)
		pthread_mutex_unlock(&W.mu);
}

void tb_writer_atfork_child(void)
{
	/* The writer thread does not exist in the child; the parent's socket
	 * must not be written by it. Start afresh on the next probe. */
	if (W.out != NULL)
		init_sync();
	if (W.fd >= 0)
		close(W.fd);
	W.fd = -1;
	W.started = 0;
	atomic_store(&W.stop, 0);
	atomic_store(&W.done, 0);
	atomic_store(&W.sleeping, 0);
	atomic_store(&W.flushed, 0);
	W.out_len = W.out_sent = 0;
	W.nends = W.ends_sent = 0;
	have_pending = 0;
	W.noted_unreachable = W.noted_lost = 0;
}
