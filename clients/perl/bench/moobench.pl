#!/usr/bin/perl
# MooBench-style overhead benchmark of the TraceBridge Perl client.
#
# A sub that recurses to depth 10 (MooBench's monitoredMethod with no busy
# time) is called N times in each configuration, each in a fresh perl:
#
#   none      no instrumentation
#   disabled  every level instrumented, probes switched off
#   tcp       every level instrumented, Kieker binary to a bridge's kieker-tcp
#             receiver (TRACEBRIDGE_HOST/TRACEBRIDGE_PORT, default 127.0.0.1:10133)
#   stomp     the same as KDB text over STOMP (TRACEBRIDGE_* as for the
#             example; a bridge with a stomp-client receiver consumes it)
#
# and the time per top-level call (10 sub executions; 21 records when
# enabled: 20 events and the TraceMetadata) is printed. Usage:
#
#   perl bench/moobench.pl [--calls N] [--depth D] [--probe wrap|manual] [--mode none|disabled|tcp|stomp|all]
#                          [--per-message N]   (stomp: records per message)
#
# --probe wrap instruments with $tb->wrap (default), manual with entry/exit
# calls in the sub's body, as the EPrints probes were placed. Each mode
# runs a warm-up of N/10 calls, then N measured calls, then flushes (the
# flush is part of the measured time).

use strict;
use warnings;

use FindBin ();
use lib "$FindBin::Bin/../lib";

use Getopt::Long ();
use JSON::PP ();
use Time::HiRes ();
use TraceBridge;

my %o = (calls => 100000, depth => 10, mode => 'all', probe => 'wrap', 'per-message' => 1);
Getopt::Long::GetOptions(\%o, 'calls=i', 'depth=i', 'mode=s', 'probe=s', 'per-message=i') or die "bad options\n";

if ($o{mode} eq 'all') {
	my $base;
	for my $mode (qw(none disabled tcp)) {
		my $out = `$^X $0 --mode $mode --calls $o{calls} --depth $o{depth} --probe $o{probe}`;
		die "mode $mode failed\n" if $?;
		my $r = JSON::PP->new->decode($out);
		$base //= $r->{ns_per_call};
		printf "%-9s %10.1f ns/call  %8.1f ns/sub  x%-6.2f sent %d dropped %d\n", $mode, $r->{ns_per_call},
			$r->{ns_per_sub}, $r->{ns_per_call} / $base, $r->{records_sent}, $r->{records_dropped};
	}
	exit 0;
}

my $tb;
if ($o{mode} ne 'none') {
	$tb = TraceBridge->new(
		transport    => $o{mode} eq 'stomp' ? 'stomp' : 'tcp',
		enabled      => $o{mode} ne 'disabled',
		max_buffer   => 256 << 20,
		max_queue    => 50_000_000,
		records_per_message => $o{'per-message'},
		report_drops => 0,
	);
}

sub plain {
	my ($d) = @_;
	return $d > 1 ? plain($d - 1) : $d;
}

sub wrapped {
	my ($d) = @_;
	return $d > 1 ? wrapped($d - 1) : $d;
}

sub manual {
	my ($d) = @_;
	$tb->entry('manual', 'main');
	my $r = $d > 1 ? manual($d - 1) : $d;
	$tb->exit('manual', 'main');
	return $r;
}

my $fn = \&plain;
if ($o{mode} ne 'none') {
	if ($o{probe} eq 'manual') {
		$fn = \&manual;
	} else {
		$tb->wrap('main::wrapped');
		$fn = \&wrapped;
	}
}

$fn->($o{depth}) for 1 .. int($o{calls} / 10) || 1;
$tb->flush(30) if $tb;
my $before = $tb ? $tb->stats : { sent => 0, dropped => 0 };
my $t0 = Time::HiRes::time();
$fn->($o{depth}) for 1 .. $o{calls};
$tb->flush(60) if $tb;
my $took = (Time::HiRes::time() - $t0) * 1e9;
my $s = $tb ? $tb->stats : { sent => 0, dropped => 0 };
print JSON::PP->new->canonical->encode({
	mode            => $o{mode},
	probe           => $o{probe},
	calls           => $o{calls},
	depth           => $o{depth},
	ns_per_call     => sprintf('%.1f', $took / $o{calls}) + 0,
	ns_per_sub      => sprintf('%.1f', $took / $o{calls} / $o{depth}) + 0,
	records_sent    => $s->{sent} - $before->{sent},
	records_dropped => $s->{dropped} - $before->{dropped},
	perl            => sprintf('%vd', $^V),
}), "\n";
