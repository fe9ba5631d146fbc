# Probe tests over the TCP transport: the records entry/exit/failed, call,
# wrap and traces produce, read back from a socket in this process with the
# independent decoder of t/lib/TBTest.pm.
use strict;
use warnings;
use FindBin ();
use lib "$FindBin::Bin/../lib", "$FindBin::Bin/lib";

use Test::More;
use Socket ();
use Time::HiRes ();
use TraceBridge;
use TBTest qw(decode listener read_all closed_port);

sub setup {
	my (%o) = @_;
	my $l  = listener();
	my $tb = TraceBridge->new(transport => 'tcp', host => '127.0.0.1', port => $l->sockport, hostname => 'test-host',
		report_drops => 0, %o);
	return ($l, $tb);
}

# records($l, $tb) flushes and returns the decoded records of every
# connection (each decoded on its own).
sub records {
	my ($l, $tb) = @_;
	ok($tb->flush(5), 'flushed');
	my @recs;
	push @recs, @{ (decode($_))[0] } for read_all($l);
	return \@recs;
}

sub events {
	my %sym = (BeforeOperationEvent => '>', AfterOperationEvent => '<', AfterOperationFailedEvent => '!');
	return [map { $sym{ $_->{type} } . $_->{operationSignature} } grep { $sym{ $_->{type} } } @{ $_[0] }];
}

subtest 'entry, exit and failed make one trace' => sub {
	my ($l, $tb) = setup();
	$tb->entry('search_book', 'Bookstore');
	$tb->entry('get_book', 'Catalog');
	$tb->failed('get_book', 'Catalog', "no such book\n");
	$tb->exit('search_book', 'Bookstore');
	my $recs = records($l, $tb);
	is(scalar @$recs, 5, 'five records');
	is_deeply($recs->[0], { type => 'TraceMetadata', lts => -1, traceId => $$, threadId => 0, sessionId => '<no-session-id>',
		hostname => 'test-host', parentTraceId => $$, parentOrderId => -1 }, 'the first trace has the pid as id');
	is_deeply(events($recs), ['>search_book', '>get_book', '!get_book', '<search_book'], 'events');
	is_deeply([map { $_->{orderIndex} } @$recs[1 .. 4]], [0 .. 3], 'orderIndex');
	is($recs->[3]{cause}, 'no such book', 'cause without its newline');
	is($recs->[1]{classSignature}, 'Bookstore', 'class');
	my @ts = map { $_->{timestamp} } @$recs[1 .. 4];
	is_deeply(\@ts, [sort { $a <=> $b } @ts], 'timestamps in ns, ordered');
	cmp_ok(abs($ts[0] - Time::HiRes::time() * 1e9), '<', 60e9, 'timestamps are wall-clock ns');
	is($tb->stats->{sent}, 5, 'stats: sent');
};

subtest 'each outermost call is a trace; explicit traces span calls' => sub {
	my ($l, $tb) = setup();
	$tb->entry('a', 'C');
	$tb->exit('a', 'C');
	$tb->entry('b', 'C');
	$tb->exit('b', 'C');
	my $id = $tb->trace_start(parent_trace_id => 99, parent_order_id => 7);
	$tb->entry('c', 'C');
	$tb->exit('c', 'C');
	$tb->entry('d', 'C');
	is_deeply([($tb->current_trace)[1, 2]], [3, 1], 'current_trace');
	$tb->exit('d', 'C');
	$tb->trace_end;
	is_deeply([$tb->current_trace], [], 'no trace after trace_end');
	my $recs  = records($l, $tb);
	my @metas = grep { $_->{type} eq 'TraceMetadata' } @$recs;
	is_deeply([map { $_->{traceId} } @metas], [$$, $$ + 2**32, $$ + 2 * 2**32], 'trace ids per process');
	is($id, $metas[2]{traceId}, 'trace_start returns the id');
	is_deeply([@{ $metas[2] }{qw(parentTraceId parentOrderId)}], [99, 7], 'parent link');
	is_deeply([map { $_->{orderIndex} } grep { $_->{traceId} == $id && $_->{type} ne 'TraceMetadata' } @$recs], [0 .. 3],
		'one explicit trace');
};

subtest 'unbalanced exits are counted, not sent' => sub {
	my ($l, $tb) = setup();
	$tb->exit('x', 'C');
	$tb->failed('x', 'C', 'e');
	is($tb->stats->{unbalanced}, 2, 'counted');
	is_deeply(records($l, $tb), [], 'nothing sent');
};

subtest 'call keeps context, aliases and errors' => sub {
	my ($l, $tb) = setup();
	my @list = $tb->call('l', 'C', sub { return (1, 2, 3) });
	my $scalar = $tb->call('s', 'C', sub { return wantarray ? 'list' : 'scalar' });
	my $x = 1;
	$tb->call('alias', 'C', sub { $_[0] = 5 }, $x);
	my $err = bless { code => 42 }, 'MyError';
	eval { $tb->call('die', 'C', sub { die $err }) };
	my $caught = $@;
	eval { $tb->call('dies', 'C', sub { die "plain\n" }) };
	is_deeply(\@list, [1, 2, 3], 'list context');
	is($scalar, 'scalar', 'scalar context');
	is($x, 5, '@_ aliased');
	is($caught, $err, 'the same exception object');
	is($@, "plain\n", 'string errors unchanged');
	my $recs = records($l, $tb);
	is_deeply(events($recs), ['>l', '<l', '>s', '<s', '>alias', '<alias', '>die', '!die', '>dies', '!dies'], 'events');
	like($recs->[-4]{cause}, qr/^MyError=HASH/, 'an object cause is stringified');
};

{
	package Shop;
	sub buy { my ($self, $item) = @_; die "sold out\n" if $item eq 'nothing'; return "bought $item" }
	sub list { return (1, 2) }
}

subtest 'wrap' => sub {
	my ($l, $tb) = setup();
	my $orig = $tb->wrap('Shop::buy');
	$tb->wrap('Shop::list', operation => 'list()', class => 'shop.Shop');
	is(ref $orig, 'CODE', 'returns the original');
	is(Shop->buy('book'), 'bought book', 'result');
	is_deeply([Shop->list], [1, 2], 'list');
	eval { Shop->buy('nothing') };
	is($@, "sold out\n", 'error');
	my $recs = records($l, $tb);
	is_deeply(events($recs), ['>Shop::buy', '<Shop::buy', '>list()', '<list()', '>Shop::buy', '!Shop::buy'], 'events');
	is($recs->[1]{classSignature}, 'Shop', 'class is the package');
	is($recs->[4]{classSignature}, 'shop.Shop', 'explicit class');
	{
		no warnings 'redefine';
		*Shop::buy = $orig;
	}
	ok(!eval { $tb->wrap('Shop::nope'); 1 }, 'wrapping a missing sub dies');
};

subtest 'disabled probes record nothing' => sub {
	my ($l, $tb) = setup(enabled => 0);
	$tb->entry('a', 'C');
	is($tb->call('b', 'C', sub { 7 }), 7, 'call still runs');
	$tb->exit('a', 'C');
	$tb->set_enabled(1);
	$tb->entry('c', 'C');
	$tb->exit('c', 'C');
	is_deeply(events(records($l, $tb)), ['>c', '<c'], 'only after enabling');
	{
		local $ENV{TRACEBRIDGE_ENABLED} = 'off';
		ok(!TraceBridge->new(transport => 'tcp', report_drops => 0)->enabled, 'TRACEBRIDGE_ENABLED=off');
	}
	my $warning = '';
	local $SIG{__WARN__} = sub { $warning .= $_[0] };
	my $typo = TraceBridge->new(transport => 'tpc', report_drops => 0);
	ok(!$typo->enabled, 'an unknown transport disables the probes');
	like($warning, qr/unknown transport 'tpc'/, 'and says so');
};

subtest 'unreachable bridge: quick, counted' => sub {
	my $tb = TraceBridge->new(transport => 'tcp', port => closed_port(), report_drops => 0);
	my $t0 = Time::HiRes::time();
	for (1 .. 2000) { $tb->entry('a', 'C'); $tb->exit('a', 'C') }
	ok($tb->flush(1) == 0, 'flush reports failure');
	cmp_ok(Time::HiRes::time() - $t0, '<', 5, 'never blocks');
	my $s = $tb->stats;
	is_deeply([@$s{qw(recorded dropped sent queued connected)}], [6000, 6000, 0, 0, 0], 'all dropped');
	like($s->{last_error}, qr/connect to 127\.0\.0\.1:\d+: /, 'last_error');
};

subtest 'full buffer drops new records' => sub {
	my $tb = TraceBridge->new(transport => 'tcp', port => closed_port(), report_drops => 0, max_buffer => 1000,
		backoff_min => 60);
	for (1 .. 100) { $tb->entry('a', 'C'); $tb->exit('a', 'C') }
	my $s = $tb->stats;
	is($s->{recorded}, 300, 'recorded');
	cmp_ok($s->{dropped_queue_full}, '>', 250, 'dropped when full');
	cmp_ok($s->{queued}, '<', 40, 'the buffer is bounded');
	$tb->close(0.5);
};

subtest 'a bridge that stops reading never blocks the program' => sub {
	my $l = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 1, ReuseAddr => 1) or die $!;
	setsockopt($l, Socket::SOL_SOCKET(), Socket::SO_RCVBUF(), 4096);
	my $tb = TraceBridge->new(transport => 'tcp', port => $l->sockport, report_drops => 0, max_buffer => 64 << 10,
		flush_interval => 0);
	my $t0 = Time::HiRes::time();
	for (1 .. 30000) { $tb->entry('a', 'C'); $tb->exit('a', 'C') }
	cmp_ok(Time::HiRes::time() - $t0, '<', 30, 'never blocks');
	my $s = $tb->stats;
	cmp_ok($s->{dropped_queue_full}, '>', 0, 'drops when the buffer is full');
	is($s->{recorded}, $s->{sent} + $s->{dropped} + $s->{queued}, 'every record accounted for');
	$tb->close(0.2);
	is($tb->stats->{queued}, 0, 'close gives up after its timeout');
};

subtest 'a late bridge gets the buffered records' => sub {
	my $port = closed_port();
	my $tb = TraceBridge->new(transport => 'tcp', port => $port, report_drops => 0, backoff_min => 0.01, backoff_max => 0.02,
		flush_interval => 0);
	$tb->entry('early', 'C');
	$tb->exit('early', 'C');
	my $l = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $port, Listen => 5, ReuseAddr => 1)
		or die "listen $port: $!";
	Time::HiRes::sleep(0.05);
	$tb->entry('late', 'C');
	$tb->exit('late', 'C');
	is_deeply(events(records($l, $tb)), ['>early', '<early', '>late', '<late'], 'nothing lost');
};

subtest 'a lost connection starts a new registry' => sub {
	my ($l, $tb) = setup(backoff_min => 0.01, backoff_max => 0.02, flush_interval => 0);
	$tb->entry('a', 'C');
	$tb->exit('a', 'C');
	$tb->flush(5);
	my $c = $l->accept;
	sysread($c, my $first, 65536);
	close $c;    # the bridge goes away
	for my $i (1 .. 200) {
		$tb->entry("b$i", 'C');
		$tb->exit("b$i", 'C');
		Time::HiRes::sleep(0.002);
		last if $tb->stats->{connects} >= 2;
	}
	$tb->flush(5);
	my @conns = read_all($l);
	ok(@conns >= 1, 'reconnected');
	my ($recs, $reg) = decode($conns[-1]);
	like($reg->{0}, qr/^kieker\.common\.record\./, 'ids from 0 again, class names re-registered');
	ok(scalar @$recs, 'the new connection decodes on its own');
	cmp_ok($tb->stats->{connects}, '>=', 2, 'connects');
};

subtest 'fork: the child has its own trace and connection' => sub {
	my ($l, $tb) = setup();
	$tb->entry('parent', 'C');
	my $pid = fork() // die "fork: $!";
	if ($pid == 0) {
		$tb->exit('parent', 'C');    # a call open at the fork: nothing in the child
		$tb->entry('child', 'C');
		$tb->exit('child', 'C');
		$tb->close(5);
		CORE::exit(0);
	}
	waitpid($pid, 0);
	$tb->exit('parent', 'C');
	$tb->flush(5);
	my @conns = map { (decode($_))[0] } read_all($l);
	my ($child) = grep { grep { $_->{traceId} == $pid } @$_ } @conns;
	ok($child, 'the child trace has the child pid as id');
	is_deeply(events($child), ['>child', '<child'], 'the child recorded only its own call');
	my @parent = map { @$_ } grep { $_ != $child } @conns;
	is_deeply(events(\@parent), ['>parent', '<parent'], 'the parent is unaffected');
};

done_testing;
