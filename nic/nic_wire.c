// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The wire between two NICs, one link per connected QP pair.
 *
 * SHM: each QP owns its receive ring, a named POSIX shared-memory object
 * (/dev/shm/npfnic-PID-QPN-NONCE) that the peer maps to transmit into and
 * unlinks once mapped, so nothing stays behind. The ring's tail is a futex
 * word: a sender that sees the receiver asleep wakes it.
 *
 * UDP: each QP owns a non-blocking datagram socket. A small thread waits on
 * all of them (epoll, edge-triggered) and rings the engine's doorbell, so
 * the engine itself waits only on futex words.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include "nic_internal.h"

#define NIC_SHM_MAGIC 0x4d48534e /* "NSHM" */
#define NIC_SOCKBUF (4 << 20)

static size_t nic_slot_size(__u32 mtu)
{
	return (sizeof(struct nic_pkt) + mtu + 63) & ~(size_t)63;
}

static struct nic_pkt *ring_slot(struct nic_shm_ring *r, __u32 nslots, __u32 slot_size, __u32 idx)
{
	return (struct nic_pkt *)((char *)r + NIC_SHM_RING_HDR +
				  (size_t)(idx % nslots) * slot_size);
}

static int shm_wire_init(struct nic_qp *qp)
{
	struct nic_wire *w = &qp->wire;
	struct nic_shm_ring *r;
	int fd, err;

	snprintf(w->rx_name, sizeof(w->rx_name), "/npfnic-%d-%u-%llx", getpid(), qp->qpn,
		 (unsigned long long)nic_now_ns());
	w->rx_size = NIC_SHM_RING_HDR + NIC_SHM_SLOTS * nic_slot_size(qp->mtu);
	fd = shm_open(w->rx_name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, w->rx_size)) {
		err = -errno;
		goto err_unlink;
	}
	r = mmap(NULL, w->rx_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (r == MAP_FAILED) {
		err = -errno;
		goto err_unlink;
	}
	close(fd);
	r->nslots = w->rx_nslots = NIC_SHM_SLOTS;
	r->slot_size = w->rx_slot_size = nic_slot_size(qp->mtu);
	__atomic_store_n(&r->magic, NIC_SHM_MAGIC, __ATOMIC_RELEASE);
	w->rx = r;
	return 0;

err_unlink:
	close(fd);
	shm_unlink(w->rx_name);
	return err;
}

static int udp_wire_init(struct nic *nic, struct nic_qp *qp)
{
	struct nic_wire *w = &qp->wire;
	struct epoll_event ev = {.events = EPOLLIN | EPOLLET};
	socklen_t alen = sizeof(w->local);
	int buf = NIC_SOCKBUF, err;

	w->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (w->fd < 0)
		return -errno;
	if (setsockopt(w->fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf)))
		setsockopt(w->fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	if (setsockopt(w->fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf)))
		setsockopt(w->fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	ev.data.fd = w->fd;
	w->local.sin_family = AF_INET;
	w->local.sin_addr = nic->udp_addr;
	if (bind(w->fd, (struct sockaddr *)&w->local, sizeof(w->local)) ||
	    getsockname(w->fd, (struct sockaddr *)&w->local, &alen) ||
	    epoll_ctl(nic->epfd, EPOLL_CTL_ADD, w->fd, &ev)) {
		err = -errno;
		goto err_close;
	}
	w->txbuf = malloc(nic_slot_size(qp->mtu));
	w->rxbuf = malloc(nic_slot_size(qp->mtu));
	if (!w->txbuf || !w->rxbuf) {
		err = -ENOMEM;
		goto err_free;
	}
	return 0;

err_free:
	free(w->txbuf);
	free(w->rxbuf);
	epoll_ctl(nic->epfd, EPOLL_CTL_DEL, w->fd, NULL);
err_close:
	close(w->fd);
	w->fd = -1;
	return err;
}

/* roce: the QP's queue of packets the device's socket received for it */
static int roce_wire_init(struct nic_qp *qp)
{
	struct nic_wire *w = &qp->wire;

	w->rxq = malloc((size_t)NIC_ROCE_RXQ * NIC_ROCE_DGRAM_MAX);
	w->rxq_len = calloc(NIC_ROCE_RXQ, sizeof(*w->rxq_len));
	w->rx_pkt = malloc(nic_slot_size(qp->mtu));
	if (!w->rxq || !w->rxq_len || !w->rx_pkt) {
		free(w->rxq);
		free(w->rxq_len);
		free(w->rx_pkt);
		w->rxq = NULL;
		return -ENOMEM;
	}
	return 0;
}

int nic_wire_init(struct nic *nic, struct nic_qp *qp)
{
	qp->wire.type = nic->opts.wire;
	if (qp->wire.type == NIC_WIRE_ROCE)
		return roce_wire_init(qp);
	return qp->wire.type == NIC_WIRE_UDP ? udp_wire_init(nic, qp) : shm_wire_init(qp);
}

/*
 * The device's socket: bound to its address and the RoCEv2 port, so that
 * one address is one device whatever QPs it has. A second process that
 * opens a device with the same address gets EADDRINUSE.
 */
int nic_roce_open(struct nic *nic)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr = nic->udp_addr};
	int buf = NIC_SOCKBUF, err;

	a.sin_port = htons(nic->opts.udp_port ? nic->opts.udp_port : NIC_ROCE_PORT);
	nic->roce_port = a.sin_port;
	nic->roce_fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (nic->roce_fd < 0)
		return -errno;
	if (setsockopt(nic->roce_fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf)))
		setsockopt(nic->roce_fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	if (setsockopt(nic->roce_fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf)))
		setsockopt(nic->roce_fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	if (bind(nic->roce_fd, (struct sockaddr *)&a, sizeof(a))) {
		err = -errno;
		goto err_close;
	}
	nic->roce_rxbuf = malloc(NIC_ROCE_DGRAM_MAX);
	nic->roce_txbuf = malloc(NIC_ROCE_DGRAM_MAX);
	nic->roce_pkt = malloc(nic_slot_size(NIC_DEFAULT_MTU));
	if (!nic->roce_rxbuf || !nic->roce_txbuf || !nic->roce_pkt) {
		err = -ENOMEM;
		goto err_close;
	}
	return 0;

err_close:
	nic_roce_close(nic);
	return err;
}

void nic_roce_close(struct nic *nic)
{
	if (nic->roce_fd >= 0)
		close(nic->roce_fd);
	nic->roce_fd = -1;
	free(nic->roce_rxbuf);
	free(nic->roce_txbuf);
	free(nic->roce_pkt);
	nic->roce_rxbuf = nic->roce_txbuf = NULL;
	nic->roce_pkt = NULL;
}

/*
 * Hand what the device's socket holds to the QPs the packets name (by
 * destination QPN, from the peer the QP is connected to). A packet for a
 * QP whose queue is full stays here, and draining stops until the QP has
 * taken some: the socket's buffer queues the rest, as a NIC's input buffer
 * would, instead of losing packets that RC would have to resend.
 */
int nic_roce_rx(struct nic *nic)
{
	int n;

	for (n = 0; n < NIC_ROCE_RXQ; n++) {
		struct sockaddr_in *from = &nic->roce_from;
		socklen_t alen = sizeof(*from);
		struct nic_qp *qp;
		struct nic_wire *w;
		ssize_t len = nic->roce_held;
		__u32 dst_qpn;

		if (!len) {
			len = recvfrom(nic->roce_fd, nic->roce_rxbuf, NIC_ROCE_DGRAM_MAX, 0,
				       (struct sockaddr *)from, &alen);
			if (len <= 0)
				break;
			nic->stats.pkts_rx++;
		}
		nic->roce_held = 0;
		dst_qpn = nic_roce_dst_qpn(nic->roce_rxbuf, len);
		qp = dst_qpn ? nic_qp_lookup(nic, dst_qpn) : NULL;
		w = qp ? &qp->wire : NULL;
		/* packets carry no source QPN: the peer's address stands for it */
		if (!qp || qp->state == QPS_INIT ||
		    from->sin_addr.s_addr != w->peer.sin_addr.s_addr ||
		    nic_roce_icrc(nic->roce_rxbuf, len, from->sin_addr.s_addr, nic->udp_addr.s_addr,
				  from->sin_port,
				  nic->roce_port) != nic_roce_icrc_of(nic->roce_rxbuf, len)) {
			nic->stats.pkts_dropped++;
			continue;
		}
		if (w->rxq_tail - w->rxq_head >= NIC_ROCE_RXQ) {
			nic->roce_held = len;
			break;
		}
		memcpy((char *)w->rxq + (size_t)(w->rxq_tail % NIC_ROCE_RXQ) * NIC_ROCE_DGRAM_MAX,
		       nic->roce_rxbuf, len);
		w->rxq_len[w->rxq_tail % NIC_ROCE_RXQ] = len;
		w->rxq_tail++;
	}
	return n;
}

static int shm_wire_connect(struct nic_qp *qp, const struct nic_qp_info *remote)
{
	struct nic_wire *w = &qp->wire;
	struct nic_shm_ring *r;
	char name[sizeof(remote->shm_name)];
	struct stat st;
	__u32 nslots, slot_size;
	int fd, err = 0;

	memcpy(name, remote->shm_name, sizeof(name));
	name[sizeof(name) - 1] = 0;
	if (strncmp(name, "/npfnic-", 8) || strchr(name + 1, '/'))
		return -EINVAL;
	fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		err = -errno;
		close(fd);
		return err;
	}
	r = mmap(NULL, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (r == MAP_FAILED)
		return -errno;
	/* each word read once: the peer may write them while they are checked */
	nslots = (size_t)st.st_size < NIC_SHM_RING_HDR ?
			 0 :
			 __atomic_load_n(&r->nslots, __ATOMIC_RELAXED);
	slot_size = (size_t)st.st_size < NIC_SHM_RING_HDR ?
			    0 :
			    __atomic_load_n(&r->slot_size, __ATOMIC_RELAXED);
	if ((size_t)st.st_size < NIC_SHM_RING_HDR ||
	    __atomic_load_n(&r->magic, __ATOMIC_ACQUIRE) != NIC_SHM_MAGIC || !nslots ||
	    slot_size < nic_slot_size(qp->mtu < remote->mtu ? qp->mtu : remote->mtu) ||
	    NIC_SHM_RING_HDR + (size_t)nslots * slot_size > (size_t)st.st_size) {
		munmap(r, st.st_size);
		return -EPROTO;
	}
	w->tx_nslots = nslots;
	w->tx_slot_size = slot_size;
	/* mapped by both ends now: the name is no longer needed */
	shm_unlink(name);
	w->tx = r;
	w->tx_size = st.st_size;
	return 0;
}

int nic_wire_connect(struct nic_qp *qp, const struct nic_qp_info *remote)
{
	struct nic_wire *w = &qp->wire;

	if (w->type == NIC_WIRE_SHM)
		return shm_wire_connect(qp, remote);
	w->peer.sin_family = AF_INET;
	w->peer.sin_addr.s_addr = remote->udp_addr;
	w->peer.sin_port = remote->udp_port;
	w->rxq_head = w->rxq_tail = 0;
	return 0;
}

void nic_wire_fini(struct nic *nic, struct nic_qp *qp)
{
	struct nic_wire *w = &qp->wire;

	if (w->type == NIC_WIRE_SHM) {
		if (w->rx) {
			munmap(w->rx, w->rx_size);
			shm_unlink(w->rx_name); /* ENOENT once the peer connected */
		}
		if (w->tx)
			munmap(w->tx, w->tx_size);
		return;
	}
	free(w->rxq);
	free(w->rxq_len);
	free(w->rx_pkt);
	w->rxq = NULL;
	if (w->fd >= 0) {
		epoll_ctl(nic->epfd, EPOLL_CTL_DEL, w->fd, NULL);
		close(w->fd);
	}
	free(w->txbuf);
	free(w->rxbuf);
}

/* A buffer for the next packet, or NULL when the link cannot take one now. */
struct nic_pkt *nic_wire_tx_begin(struct nic_qp *qp)
{
	struct nic_wire *w = &qp->wire;
	struct nic_shm_ring *r = w->tx;
	__u32 tail;

	if (w->type == NIC_WIRE_UDP)
		return w->txbuf;
	if (w->type == NIC_WIRE_ROCE)
		return qp->nic->roce_pkt;
	if (!r)
		return NULL;
	tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
	if (tail - atomic_load_explicit(&r->head, memory_order_acquire) >= w->tx_nslots)
		return NULL;
	return ring_slot(r, w->tx_nslots, w->tx_slot_size, tail);
}

/*
 * Fault injection: lose one packet in `every`, pseudo-randomly (a fixed
 * period would resonate with the retransmission window and lose the same
 * PSN forever).
 */
static bool nic_wire_lose(struct nic_wire *w, __u32 every)
{
	__u32 x = w->tx_count ? w->tx_count : 0x9e3779b9u ^ (__u32)(uintptr_t)w;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	w->tx_count = x;
	return x % every == 0;
}

void nic_wire_tx_commit(struct nic_qp *qp, struct nic_pkt *pkt)
{
	struct nic_wire *w = &qp->wire;
	struct nic *nic = qp->nic;

	pkt->magic = NIC_PKT_MAGIC;
	pkt->version = NIC_PKT_VERSION;
	pkt->src_qpn = qp->qpn;
	pkt->dst_qpn = qp->peer_qpn;
	nic->stats.pkts_tx++;
	if (nic->opts.tx_drop_every && nic_wire_lose(w, nic->opts.tx_drop_every)) {
		nic->stats.pkts_dropped++;
		return;
	}
	if (w->type == NIC_WIRE_ROCE) {
		ssize_t len = nic_roce_encode(qp, pkt, nic->roce_txbuf);

		if (len < 0 || sendto(nic->roce_fd, nic->roce_txbuf, len, 0,
				      (struct sockaddr *)&w->peer, sizeof(w->peer)) < 0)
			nic->stats.pkts_dropped++;
		return;
	}
	if (w->type == NIC_WIRE_UDP) {
		if (sendto(w->fd, pkt, sizeof(*pkt) + pkt->len, 0, (struct sockaddr *)&w->peer,
			   sizeof(w->peer)) < 0)
			nic->stats.pkts_dropped++; /* lost like on a real link: RC recovers */
		return;
	}
	atomic_store_explicit(&w->tx->tail, atomic_load(&w->tx->tail) + 1, memory_order_seq_cst);
	if (atomic_load(&w->tx->sleeping))
		nic_futex_wake(&w->tx->tail, true);
}

static bool pkt_valid(const struct nic_qp *qp, const struct nic_pkt *pkt, size_t n)
{
	return n >= sizeof(*pkt) && pkt->magic == NIC_PKT_MAGIC &&
	       pkt->version == NIC_PKT_VERSION && pkt->len <= qp->mtu &&
	       n >= sizeof(*pkt) + pkt->len && pkt->dst_qpn == qp->qpn &&
	       pkt->src_qpn == qp->peer_qpn;
}

/* The next received packet (valid for this QP), or NULL. */
struct nic_pkt *nic_wire_rx_peek(struct nic_qp *qp)
{
	struct nic_wire *w = &qp->wire;

	for (;;) {
		struct nic_pkt *pkt;
		ssize_t n;

		if (w->type == NIC_WIRE_ROCE) {
			/*
			 * Decoded only now, in order: what a packet leaves out
			 * (a WRITE's target after its first packet, a SEND's
			 * offset) comes from the QP's state as the packets before
			 * it left it. Counted by nic_roce_rx().
			 */
			if (w->rx_decoded)
				return w->rx_pkt;
			if (w->rxq_head == w->rxq_tail)
				return NULL;
			if (!nic_roce_decode(qp,
					     (char *)w->rxq + (size_t)(w->rxq_head % NIC_ROCE_RXQ) *
								      NIC_ROCE_DGRAM_MAX,
					     w->rxq_len[w->rxq_head % NIC_ROCE_RXQ], w->rx_pkt)) {
				w->rx_decoded = true;
				return w->rx_pkt;
			}
			qp->nic->stats.pkts_dropped++;
			w->rxq_head++;
			continue;
		}
		if (w->type == NIC_WIRE_UDP) {
			if (w->rx_held)
				return w->rxbuf;
			struct sockaddr_in from;
			socklen_t fromlen = sizeof(from);

			n = recvfrom(w->fd, w->rxbuf, nic_slot_size(qp->mtu), 0,
				     (struct sockaddr *)&from, &fromlen);
			if (n < 0)
				return NULL;
			/*
			 * The socket is not connected: only the peer's own
			 * address and port are its packets (any host could
			 * send them requests and acknowledgements otherwise);
			 * anyone else's is dropped below, as malformed.
			 */
			if (fromlen != sizeof(from) ||
			    from.sin_addr.s_addr != w->peer.sin_addr.s_addr ||
			    from.sin_port != w->peer.sin_port)
				n = 0;
			pkt = w->rxbuf;
			w->rx_held = true;
		} else {
			struct nic_shm_ring *r = w->rx;
			__u32 head = atomic_load_explicit(&r->head, memory_order_relaxed);

			if (head == atomic_load_explicit(&r->tail, memory_order_acquire))
				return NULL;
			pkt = ring_slot(r, w->rx_nslots, w->rx_slot_size, head);
			n = w->rx_slot_size;
		}
		qp->nic->stats.pkts_rx++;
		if (pkt_valid(qp, pkt, n))
			return pkt;
		qp->nic->stats.pkts_dropped++;
		nic_wire_rx_release(qp);
	}
}

void nic_wire_rx_release(struct nic_qp *qp)
{
	struct nic_wire *w = &qp->wire;

	if (w->type == NIC_WIRE_UDP) {
		w->rx_held = false;
		return;
	}
	if (w->type == NIC_WIRE_ROCE) {
		w->rx_decoded = false;
		w->rxq_head++;
		return;
	}
	atomic_store_explicit(&w->rx->head, atomic_load(&w->rx->head) + 1, memory_order_release);
}

static void *nic_udp_waker(void *arg)
{
	struct nic *nic = arg;
	struct epoll_event ev[16];

	for (;;) {
		int i, n = epoll_wait(nic->epfd, ev, 16, -1);

		if (n < 0 && errno != EINTR)
			break;
		for (i = 0; i < n; i++)
			if (ev[i].data.fd == nic->stop_efd && ev[i].data.fd >= 0)
				return NULL;
		if (n > 0)
			nic_doorbell(nic);
	}
	return NULL;
}

int nic_udp_thread_start(struct nic *nic)
{
	struct epoll_event ev = {.events = EPOLLIN};
	int err;

	nic->epfd = epoll_create1(EPOLL_CLOEXEC);
	nic->stop_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (nic->epfd < 0 || nic->stop_efd < 0) {
		err = -errno;
		goto err_close;
	}
	ev.data.fd = nic->stop_efd;
	if (epoll_ctl(nic->epfd, EPOLL_CTL_ADD, nic->stop_efd, &ev)) {
		err = -errno;
		goto err_close;
	}
	if (nic->roce_fd >= 0) {
		struct epoll_event rev = {.events = EPOLLIN | EPOLLET, .data.fd = nic->roce_fd};

		if (epoll_ctl(nic->epfd, EPOLL_CTL_ADD, nic->roce_fd, &rev)) {
			err = -errno;
			goto err_close;
		}
	}
	err = -pthread_create(&nic->udp_thread, NULL, nic_udp_waker, nic);
	if (err)
		goto err_close;
	nic->udp_thread_started = true;
	return 0;

err_close:
	if (nic->epfd >= 0)
		close(nic->epfd);
	if (nic->stop_efd >= 0)
		close(nic->stop_efd);
	nic->epfd = nic->stop_efd = -1;
	return err;
}

void nic_udp_thread_stop(struct nic *nic)
{
	__u64 one = 1;

	if (nic->udp_thread_started) {
		if (write(nic->stop_efd, &one, sizeof(one)) < 0)
			pthread_cancel(nic->udp_thread);
		pthread_join(nic->udp_thread, NULL);
		nic->udp_thread_started = false;
	}
	if (nic->epfd >= 0)
		close(nic->epfd);
	if (nic->stop_efd >= 0)
		close(nic->stop_efd);
	nic->epfd = nic->stop_efd = -1;
}
