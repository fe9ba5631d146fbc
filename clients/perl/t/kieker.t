# Encoding tests: hand-computed frames and a golden stream written by
# tracebridge's Go encoder (testdata/golden.bin from testdata/golden.json;
# regenerate with `go test ./clients/perl -run TestGolden -update`).
use strict;
use warnings;
use FindBin ();
use lib "$FindBin::Bin/../lib", "$FindBin::Bin/lib";

use Test::More;
use JSON::PP ();
use TraceBridge::Kieker qw(:all);
use TBTest qw(decode);

sub entry { my ($id, $s) = @_; return pack('l>l>l>', -1, $id, length $s) . $s }

subtest 'before event by hand' => sub {
	my $r = TraceBridge::Kieker->new;
	my $buf = '';
	$r->append(\$buf, BEFORE, 1000, 42, 0, 'm.f', 'm');
	is(unpack('H*', $buf), unpack('H*', entry(0, BEFORE_OPERATION_EVENT) . entry(1, 'm.f') . entry(2, 'm')
		. pack('l>q>q>q>l>l>l>', 0, -1, 1000, 42, 0, 1, 2)), 'entries, then the frame');
	my $buf2 = '';
	$r->append(\$buf2, AFTER, 1001, 42, 1, 'm.f', 'm');
	is(unpack('H*', $buf2), unpack('H*', entry(3, AFTER_OPERATION_EVENT) . pack('l>q>q>q>l>l>l>', 3, -1, 1001, 42, 1, 1, 2)),
		'known strings reuse their ids');
	is($r->len, 4, 'four strings registered');
};

subtest 'trace metadata by hand' => sub {
	my $buf = '';
	TraceBridge::Kieker->new->append_lts(\$buf, META, 5, 7, 8, 's', 'h', 7, -1);
	is(unpack('H*', $buf), unpack('H*', entry(0, TRACE_METADATA) . entry(1, 's') . entry(2, 'h'))
		. '00000000' . '0000000000000005' . '0000000000000007' . '0000000000000008'
		. '00000001' . '00000002' . '0000000000000007' . 'ffffffff', 'TraceMetadata frame');
};

subtest 'failed event' => sub {
	my $buf = '';
	TraceBridge::Kieker->new->append_lts(\$buf, FAILED, 77, 9, 1, 3, 'op', 'c', 'boom');
	my ($recs, $reg) = decode($buf);
	is_deeply($recs, [{ type => 'AfterOperationFailedEvent', lts => 77, timestamp => 9, traceId => 1, orderIndex => 3,
		operationSignature => 'op', classSignature => 'c', cause => 'boom' }], 'decodes');
	is_deeply($reg, { 0 => AFTER_OPERATION_FAILED_EVENT, 1 => 'op', 2 => 'c', 3 => 'boom' }, 'registry order');
};

subtest 'UTF-8' => sub {
	for my $c (['a', 1], ["\x{fc}", 2], ["\x{4e2d}", 3], ["\x{1f40d}", 4], ['', 0], ["\xc3\xbc", 2]) {
		my ($s, $n) = @$c;
		my $buf = '';
		TraceBridge::Kieker->new->id(\$buf, $s);
		is_deeply([unpack('l>l>l>', $buf)], [-1, 0, $n], sprintf('%vx is %d bytes', $s, $n));
	}
	is(utf8_bytes(undef), '', 'undef is empty');
	is(utf8_bytes("\xfc\xff"), "\xc3\xbc\xc3\xbf", 'invalid UTF-8 bytes are Latin-1');
	is(utf8_bytes("ab\x{4e2d}", 4), 'ab', 'cut at a character boundary');
	is(utf8_bytes("ab\x{4e2d}", 5), "ab\xe4\xb8\xad", 'a whole character stays');
	is(length(utf8_bytes('x' x (MAX_STRING + 10))), MAX_STRING, 'MAX_STRING');
};

subtest 'integers wrap like Java' => sub {
	my $buf = '';
	TraceBridge::Kieker->new->append(\$buf, BEFORE, -1, -5, 2**31 + 5, 'o', 'c');
	my ($recs) = decode($buf);
	is_deeply([@{ $recs->[0] }{qw(timestamp traceId orderIndex)}], [-1, -5, -2**31 + 5], 'wrapped');
};

subtest 'golden stream from Go' => sub {
	open(my $jf, '<:raw', "$FindBin::Bin/testdata/golden.json") or die $!;
	my $spec = JSON::PP->new->utf8->decode(do { local $/; <$jf> });
	open(my $bf, '<:raw', "$FindBin::Bin/testdata/golden.bin") or die $!;
	my $golden = do { local $/; <$bf> };
	my %kind = (TraceMetadata => META, BeforeOperationEvent => BEFORE, AfterOperationEvent => AFTER,
		AfterOperationFailedEvent => FAILED);
	my $r = TraceBridge::Kieker->new;
	my $buf = '';
	for my $x (@$spec) {
		my $k = $kind{ $x->{type} };
		if ($k == META) {
			$r->append(\$buf, $k, @{$x}{qw(traceId threadId sessionId hostname parentTraceId parentOrderId)});
		} else {
			$r->append(\$buf, $k, @{$x}{qw(timestamp traceId orderIndex operationSignature classSignature)},
				$k == FAILED ? $x->{cause} : ());
		}
	}
	is(unpack('H*', $buf), unpack('H*', $golden), 'same bytes as the Go encoder');
	my ($recs) = decode($golden);
	delete $_->{lts} for @$recs;
	is_deeply($recs, $spec, 'the independent decoder reads the spec back');
};

done_testing;
