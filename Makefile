# SPDX-License-Identifier: GPL-2.0
# npf: network controllers that take page faults.
#
#   make            build everything into build/ (installs Debian deps first)
#   make check      build and run the test suite (as root)
#   make check-layers  daemon/ files call and include only lower layers
#   make unit       build and run the unit tests only (no root, no npfd)
#   make mutate     break the product on purpose, one bug at a time, and show
#                   which tests catch each (scripts/mutate.sh; slow, as root)
#   make demo       run npfd plus a real workload and print what happened
#   make bench      run the benchmarks
#   make install    install into $(DESTDIR)$(PREFIX) (default /usr/local; the
#                   config file goes to $(SYSCONFDIR), default /etc)
#   make V=1        show full commands

O	?= build
CC	?= gcc
CLANG	?= clang
BPFTOOL	?= bpftool

ifeq ($(V),1)
Q =
msg =
else
Q = @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

ARCH := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')

# CFLAGS is the user's (optimization, debug info, sanitizers): `make CFLAGS=-O0`
# replaces it whole. What the build cannot do without lives in NPF_CFLAGS,
# which comes first so that CFLAGS may still override a warning or -std.
CFLAGS	?= -O2 -g
NPF_CFLAGS := -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers \
	   -D_GNU_SOURCE -std=gnu11 -Iinclude -Iclient -Inic -Icommon -I$(O)/gen -MMD -MP

# One version for the programs, the library, the man pages and npf.pc.
NPF_VERSION := $(shell cat VERSION)
LDLIBS_NPFD := -lbpf -luring -lelf -lz -lpthread -lsystemd
LDLIBS_NPFCTL := -lbpf -luring -lelf -lz

BPF_CFLAGS := -O2 -g -target bpf -D__TARGET_ARCH_$(ARCH) -Iinclude -I$(O)/gen -Wall

DAEMON_SRCS := $(wildcard daemon/*.c)
COMMON_SRCS := $(wildcard common/*.c)
LIB_SRCS    := $(wildcard client/lib*.c)
NPFCTL_SRCS := $(wildcard client/npfctl/*.c)
NIC_SRCS    := $(wildcard nic/*.c)
BPF_SRCS    := $(wildcard bpf/*.bpf.c)
TEST_SRCS   := $(wildcard tests/*.c)
UNIT_SRCS   := $(wildcard tests/unit/*.c)
BENCH_SRCS  := $(wildcard bench/*.c)
EXAMPLE_SRCS := $(wildcard examples/*.c)

BPF_OBJS  := $(patsubst bpf/%.bpf.c,$(O)/bpf/%.bpf.o,$(BPF_SRCS))
POLICIES  := $(patsubst policies/%.bpf.c,$(O)/policies/%.bpf.o,$(wildcard policies/*.bpf.c))
SKELS     := $(patsubst bpf/%.bpf.c,$(O)/gen/%.skel.h,$(BPF_SRCS))
TESTS     := $(patsubst tests/%.c,$(O)/tests/%,$(TEST_SRCS))
# Unit tests (no npfd, no root) sit beside the others as unit-NAME, so the runner finds them.
UNIT_TESTS := $(patsubst tests/unit/%.c,$(O)/tests/unit-%,$(UNIT_SRCS))
BENCHES   := $(patsubst bench/%.c,$(O)/bin/npf-bench-%,$(BENCH_SRCS))
EXAMPLES  := $(patsubst examples/%.c,$(O)/bin/npf-%,$(EXAMPLE_SRCS))
LIBNPF_A  := $(O)/lib/libnpf.a
LIBNPF_SO := $(O)/lib/libnpf.so
LIBNIC_A  := $(O)/lib/libnpfnic.a
# common/ as an archive: each program links only the modules it uses.
LIBCOMMON_A := $(O)/lib/libnpfcommon.a
COMMON_OBJS := $(patsubst %.c,$(O)/obj/%.o,$(COMMON_SRCS))
MANPAGES    := $(patsubst man/%,$(O)/gen/man/%,$(wildcard man/*.[0-9]))

DEPS_STAMP := $(O)/.deps-installed

all: $(O)/bin/npfd $(O)/bin/npfctl $(LIBNPF_A) $(LIBNPF_SO) $(LIBNIC_A) $(POLICIES) $(TESTS) \
     $(UNIT_TESTS) $(BENCHES) $(EXAMPLES) $(MANPAGES) verbs-if-abi

# Debian packages: checked once per build tree, re-checked when the list changes.
$(DEPS_STAMP): scripts/deps.sh
	$(Q)mkdir -p $(O)
	$(Q)sh scripts/deps.sh
	$(Q)touch $@

# vmlinux.h from the running kernel's BTF, rewritten only when its content changes
# so that BPF objects are not rebuilt for nothing.
$(O)/gen/vmlinux.h: | $(DEPS_STAMP)
	$(call msg,GEN,$@)
	$(Q)mkdir -p $(O)/gen
	$(Q)$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@.tmp
	$(Q)if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi

$(O)/bpf/%.bpf.o: bpf/%.bpf.c $(O)/gen/vmlinux.h | $(DEPS_STAMP)
	$(call msg,BPF,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -MMD -MP -c $< -o $@

# Fault policies: BPF objects npfd loads at run time (npfctl policy load).
$(O)/policies/%.bpf.o: policies/%.bpf.c $(O)/gen/vmlinux.h | $(DEPS_STAMP)
	$(call msg,POLICY,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -Ibpf -MMD -MP -c $< -o $@

$(O)/gen/%.skel.h: $(O)/bpf/%.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< > $@.tmp && mv $@.tmp $@

# npf_version.h from VERSION (the files that include it rebuild through -MMD).
$(O)/gen/npf_version.h: VERSION
	$(call msg,GEN,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)printf '#define NPF_VERSION "%s"\n' "$(NPF_VERSION)" > $@

$(O)/obj/%.o: %.c | $(DEPS_STAMP) $(O)/gen/npf_version.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(NPF_CFLAGS) $(CFLAGS) -c $< -o $@

$(O)/obj/lib/%.o: client/%.c | $(DEPS_STAMP) $(O)/gen/npf_version.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(NPF_CFLAGS) $(CFLAGS) -fPIC -fvisibility=hidden -c $< -o $@

# The daemon includes the skeletons: make them before compiling it.
$(patsubst %.c,$(O)/obj/%.o,$(DAEMON_SRCS)): | $(SKELS)

$(LIBCOMMON_A): $(COMMON_OBJS)
	$(call msg,AR,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(O)/bin/npfd: $(patsubst %.c,$(O)/obj/%.o,$(DAEMON_SRCS)) $(LIBCOMMON_A)
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS_NPFD)

LIB_OBJS := $(patsubst client/%.c,$(O)/obj/lib/%.o,$(LIB_SRCS))

$(LIBNPF_A): $(LIB_OBJS)
	$(call msg,AR,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(LIBNPF_SO): $(LIB_OBJS) client/libnpf.map
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -shared -Wl,--version-script=client/libnpf.map -Wl,-soname,libnpf.so.0 \
		-o $@ $(LIB_OBJS)

# The software RNIC: a static library linked into applications (nic/README.md).
$(LIBNIC_A): $(patsubst %.c,$(O)/obj/%.o,$(NIC_SRCS))
	$(call msg,AR,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)rm -f $@ && ar rcs $@ $^

# npfctl: one file per object (bpftool's layout), the print layer in common/.
$(O)/bin/npfctl: $(patsubst %.c,$(O)/obj/%.o,$(NPFCTL_SRCS)) $(LIBCOMMON_A) $(LIBNPF_A)
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS_NPFCTL)

$(O)/tests/%: $(O)/obj/tests/%.o $(LIBNIC_A) $(LIBNPF_A)
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ -luring -lbpf -lpthread -lz

# ------------------------------------------------------------------ #
# Unit tests: pure code, no root, no npfd. One program per unit:
# tests/unit/NAME.c, built into $(O)/tests/unit-NAME beside the other tests,
# so that tests/run.sh runs it with the rest of make check (make unit runs
# only them); exit 0 pass, 1 fail. tests/unit/unit.h has checks that report
# every failure and the harness's alarm; headers come from daemon/, bench/,
# client/, common/ and include/. Each links, in this order, what it names in
# UNIT_OBJS_NAME (objects from elsewhere, e.g.
#   UNIT_OBJS_foo := $(O)/obj/nic/nic_wire.o
# ), libnpfd-core.a (every daemon/*.c, main.c's main() renamed), libnpfcommon.a and
# libnpf.a: the linker takes only the members the unit uses. A pure function
# buried in a file with globals moves into a small file of its own
# (daemon/runs.c, daemon/verifier_log.c) rather than being copied.
NPFD_CORE_A := $(O)/lib/libnpfd-core.a

$(NPFD_CORE_A): $(patsubst %.c,$(O)/obj/%.o,$(filter-out daemon/main.c,$(DAEMON_SRCS))) \
		$(O)/obj/daemon/main-unit.o
	$(call msg,AR,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)rm -f $@ && ar rcs $@ $^

# main.c with its main() renamed: what else it defines (npfd's state, now_ns,
# the id counters) links like any other part of npfd.
$(O)/obj/daemon/main-unit.o: $(O)/obj/daemon/main.o
	$(call msg,OBJCOPY,$@)
	$(Q)objcopy --redefine-sym main=npfd_main $< $@

$(patsubst %.c,$(O)/obj/%.o,$(UNIT_SRCS)): NPF_CFLAGS += -Idaemon -Ibench -Itests/unit

.SECONDEXPANSION:
$(O)/tests/unit-%: $(O)/obj/tests/unit/%.o $$(UNIT_OBJS_$$*) $(NPFD_CORE_A) $(LIBCOMMON_A) \
		   $(LIBNPF_A)
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS_NPFD) -lm

unit: $(UNIT_TESTS)
	$(Q)sh tests/run.sh $(patsubst $(O)/tests/%,%,$(UNIT_TESTS))

mutate: all
	$(Q)sh scripts/mutate.sh

$(O)/bin/npf-bench-%: $(O)/obj/bench/%.o $(LIBNIC_A) $(LIBNPF_A) $(LIBCOMMON_A)
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ -luring -lbpf -lpthread -lm -lz

$(O)/bin/npf-%: $(O)/obj/examples/%.o $(LIBNIC_A) $(LIBNPF_A)
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ -lpthread -lz

# ------------------------------------------------------------------ #
# verbs/: the libibverbs provider for the software NIC and npf-run.
# The provider uses libibverbs' private provider ABI, which changes with
# every rdma-core release: only rdma-core 44 (IBVERBS_PRIVATE_34) is known.
VERBS_PABI   := 34
VERBS_PROV   := $(O)/lib/libnpfverbs-rdmav$(VERBS_PABI).so
VERBS_PRELOAD := $(O)/lib/libnpfverbs-preload.so
VERBS_OK     := $(O)/gen/verbs-abi-$(VERBS_PABI).ok
VERBS_PIC    := $(patsubst %.c,$(O)/obj/pic/%.o,$(NIC_SRCS) verbs/npf_verbs.c $(LIB_SRCS))
# The provider and the preload library are loaded into other programs
# (Debian's ibv_* and perftest binaries), and the verbs test helpers run with
# the preload library first (npf-run's LD_PRELOAD): all built without
# sanitizers even in make check-sanitize, whose runtime must be first in a
# process.
PLUGIN_CFLAGS := $(filter-out -fsanitize%,$(CFLAGS))

# `make` builds verbs/ when the installed libibverbs has the provider ABI it
# is written for, and otherwise says why and goes on without it (its tests
# then skip); `make verbs` fails instead.
verbs-if-abi: | $(DEPS_STAMP)
	$(Q)if sh scripts/verbs-abi.sh $(VERBS_PABI); then $(MAKE) --no-print-directory -q verbs || $(MAKE) --no-print-directory verbs; \
	else echo "npf: verbs/ (npf-run, the libibverbs provider) not built: see above"; fi

verbs: $(VERBS_PROV) $(VERBS_PRELOAD) $(O)/bin/npf-run \
       $(patsubst tests/helpers/%.c,$(O)/tests/helpers/%,$(wildcard tests/helpers/*.c)) \
       $(O)/bin/npf-bench-perftest_odp $(O)/bin/npf-bench-perftest_budget

# bench/run.sh runs npf-bench-NAME: the perftest benchmarks are scripts of the tree
$(O)/bin/npf-bench-perftest_%: bench/perftest_%.sh
	$(Q)mkdir -p $(dir $@)
	$(Q)ln -sf $(CURDIR)/bench/perftest_$*.sh $@

# helpers the verbs tests run under npf-run (not tests themselves)
$(O)/tests/helpers/%: tests/helpers/%.c $(VERBS_OK) | $(DEPS_STAMP)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(NPF_CFLAGS) $(PLUGIN_CFLAGS) -o $@ $< -libverbs -lpthread

$(VERBS_OK): scripts/verbs-abi.sh | $(DEPS_STAMP)
	$(Q)mkdir -p $(dir $@)
	$(Q)sh scripts/verbs-abi.sh $(VERBS_PABI)
	$(Q)touch $@

$(O)/obj/pic/%.o: %.c $(VERBS_OK) | $(DEPS_STAMP)
	$(call msg,CC-PIC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(NPF_CFLAGS) $(PLUGIN_CFLAGS) -fPIC -c $< -o $@

$(VERBS_PROV): $(VERBS_PIC) verbs/npf_verbs.map
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -shared -Wl,--version-script=verbs/npf_verbs.map -Wl,-z,defs -o $@ \
		$(VERBS_PIC) -libverbs -lpthread -lz

$(VERBS_PRELOAD): verbs/npf_verbs_preload.c | $(DEPS_STAMP)
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(NPF_CFLAGS) $(PLUGIN_CFLAGS) -fPIC -shared -o $@ $< -ldl

$(O)/bin/npf-run: verbs/npf-run.sh
	$(call msg,GEN,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)cp $< $@ && chmod 0755 $@

# ------------------------------------------------------------------ #
# make install: PREFIX and DESTDIR as usual; the default configuration
# goes to SYSCONFDIR (/etc: npfd reads /etc/npf/npfd.conf) and is not
# overwritten when present. The BPF objects are embedded in npfd (skeletons);
# the .bpf.o files are installed for inspection (bpftool prog/btf dump).
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
SBINDIR    ?= $(PREFIX)/sbin
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR     ?= $(PREFIX)/share/man
SYSCONFDIR ?= /etc
UNITDIR    ?= $(PREFIX)/lib/systemd/system
NPF_LIBDIR := $(LIBDIR)/npf
INSTALL    ?= install

$(O)/gen/npfd.service: systemd/npfd.service.in Makefile
	$(call msg,GEN,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)sed 's|@SBINDIR@|$(SBINDIR)|g' $< > $@

# Man pages with the version from VERSION on their .TH line.
$(O)/gen/man/%: man/% VERSION
	$(call msg,GEN,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)sed 's|@VERSION@|$(NPF_VERSION)|g' $< > $@

$(O)/gen/npf.pc: Makefile VERSION
	$(call msg,GEN,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' 'includedir=$(INCLUDEDIR)' '' \
		'Name: libnpf' 'Description: register memory with npfd without pinning it' \
		'Version: $(NPF_VERSION)' 'Libs: -L$${libdir} -lnpf' 'Libs.private: -lpthread' \
		'Cflags: -I$${includedir}' > $@

install: $(O)/bin/npfd $(O)/bin/npfctl $(LIBNPF_A) $(LIBNPF_SO) $(BPF_OBJS) $(POLICIES) \
		$(O)/gen/npfd.service $(O)/gen/npf.pc $(MANPAGES) verbs
	$(call msg,INSTALL,$(DESTDIR)$(PREFIX))
	$(Q)$(INSTALL) -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/pkgconfig \
		$(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(NPF_LIBDIR)/bpf $(DESTDIR)$(NPF_LIBDIR)/policies \
		$(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSCONFDIR)/npf \
		$(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8
	$(Q)$(INSTALL) -m 0755 $(O)/bin/npfd $(DESTDIR)$(SBINDIR)/npfd
	$(Q)$(INSTALL) -m 0755 $(O)/bin/npfctl $(DESTDIR)$(BINDIR)/npfctl
	$(Q)$(INSTALL) -m 0644 $(LIBNPF_A) $(DESTDIR)$(LIBDIR)/libnpf.a
	$(Q)$(INSTALL) -m 0755 $(LIBNPF_SO) $(DESTDIR)$(LIBDIR)/libnpf.so.$(NPF_VERSION)
	$(Q)ln -sf libnpf.so.$(NPF_VERSION) $(DESTDIR)$(LIBDIR)/libnpf.so.0
	$(Q)ln -sf libnpf.so.0 $(DESTDIR)$(LIBDIR)/libnpf.so
	$(Q)$(INSTALL) -m 0644 $(O)/gen/npf.pc $(DESTDIR)$(LIBDIR)/pkgconfig/npf.pc
	$(Q)$(INSTALL) -m 0644 client/npf.h include/npf_abi.h $(DESTDIR)$(INCLUDEDIR)/
	$(Q)$(INSTALL) -m 0644 $(BPF_OBJS) $(DESTDIR)$(NPF_LIBDIR)/bpf/
	$(Q)$(INSTALL) -m 0644 $(POLICIES) $(DESTDIR)$(NPF_LIBDIR)/policies/
	$(Q)$(INSTALL) -m 0644 $(O)/gen/npfd.service $(DESTDIR)$(UNITDIR)/npfd.service
	$(Q)[ -e $(DESTDIR)$(SYSCONFDIR)/npf/npfd.conf ] || \
		$(INSTALL) -m 0644 etc/npfd.conf $(DESTDIR)$(SYSCONFDIR)/npf/npfd.conf
	$(Q)for m in $(MANPAGES); do \
		$(INSTALL) -m 0644 $$m $(DESTDIR)$(MANDIR)/man$${m##*.}/ || exit 1; done
	$(Q)$(INSTALL) -m 0755 $(O)/bin/npf-run $(DESTDIR)$(BINDIR)/npf-run
	$(Q)$(INSTALL) -m 0755 $(VERBS_PROV) $(VERBS_PRELOAD) $(DESTDIR)$(NPF_LIBDIR)/

uninstall:
	$(call msg,UNINSTALL,$(DESTDIR)$(PREFIX))
	$(Q)rm -f $(DESTDIR)$(SBINDIR)/npfd $(DESTDIR)$(BINDIR)/npfctl \
		$(DESTDIR)$(LIBDIR)/libnpf.a $(DESTDIR)$(LIBDIR)/libnpf.so* \
		$(DESTDIR)$(LIBDIR)/pkgconfig/npf.pc $(DESTDIR)$(INCLUDEDIR)/npf.h \
		$(DESTDIR)$(INCLUDEDIR)/npf_abi.h $(DESTDIR)$(UNITDIR)/npfd.service \
		$(DESTDIR)$(MANDIR)/man3/libnpf.3 $(DESTDIR)$(MANDIR)/man5/npfd.conf.5 \
		$(DESTDIR)$(MANDIR)/man8/npfd.8 $(DESTDIR)$(MANDIR)/man8/npfctl.8 \
		$(DESTDIR)$(BINDIR)/npf-run $(DESTDIR)$(MANDIR)/man1/npf-run.1
	$(Q)rm -rf $(DESTDIR)$(NPF_LIBDIR)
	$(Q)echo "  kept $(DESTDIR)$(SYSCONFDIR)/npf/npfd.conf (remove it by hand if unwanted)"

check: all check-abi
	$(Q)sh tests/run.sh

# The suite again with AddressSanitizer + UndefinedBehaviorSanitizer (build-san/);
# any report from any process fails it (scripts/check-sanitize.sh).
check-sanitize:
	$(Q)sh scripts/check-sanitize.sh

# libFuzzer targets (tests/fuzz/), FUZZ_SECONDS each from their corpus.
fuzz: | $(DEPS_STAMP)
	$(Q)sh scripts/fuzz.sh

# daemon/'s layers: no file calls or includes one of a higher layer
# (scripts/check-layers.sh, from the objects' symbols and the includes).
check-layers: $(O)/bin/npfd
	$(Q)sh scripts/check-layers.sh $(O)

# libnpf's exported symbols and types against npf.h, the map and the recorded
# ABI (scripts/check-abi.sh); abi-baseline records a deliberate change.
check-abi: $(LIBNPF_SO)
	$(Q)sh scripts/check-abi.sh $(LIBNPF_SO)

abi-baseline: $(LIBNPF_SO)
	$(Q)sh scripts/check-abi.sh --record $(LIBNPF_SO)

demo: all
	$(Q)sh scripts/demo.sh

bench: all
	$(Q)sh bench/run.sh

clean:
	$(Q)rm -rf $(O)

.PHONY: all check check-abi check-layers abi-baseline check-sanitize fuzz unit mutate demo bench clean install uninstall verbs verbs-if-abi
.DELETE_ON_ERROR:
.SECONDARY:

-include $(shell find $(O) -name '*.d' 2>/dev/null)
