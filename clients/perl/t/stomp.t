# The STOMP transport against a small fake broker (a forked child that
# answers CONNECT and records every frame), so no RabbitMQ is needed.
# Needs Net::Stomp (libnet-stomp-perl): skipped without it unless
# TRACEBRIDGE_REQUIRE_SERVICES is set.
use strict;
use warnings;
use FindBin ();
use lib "$FindBin::Bin/../lib", "$FindBin::Bin/lib";

use File::Temp ();
use Time::HiRes ();
use Test::More;
use TraceBridge;
use TBTest qw(listener closed_port);

unless (eval { require Net::Stomp; 1 }) {
	if ($ENV{TRACEBRIDGE_REQUIRE_SERVICES}) {
		fail('Net::Stomp (libnet-stomp-perl) is not installed; TRACEBRIDGE_REQUIRE_SERVICES is set');
		done_testing;
		exit;
	}
	plan skip_all => 'Net::Stomp (libnet-stomp-perl) is not installed';
}

# broker($reply) forks a fake broker answering CONNECT with $reply
# ('CONNECTED' or 'ERROR'); returns (port, sub that stops it and returns
# the frames it received as [command, {headers}, body]).
sub broker {
	my ($reply) = @_;
	my $l   = listener();
	my $log = File::Temp->new;
	my $pid = fork() // die "fork: $!";
	if ($pid == 0) {
		open(my $out, '>>:raw', $log->filename) or die $!;
		$out->autoflush(1);
		while (my $c = $l->accept) {
			my $buf = '';
			while (sysread($c, $buf, 65536, length $buf)) {
				while ($buf =~ s/\A\n*([^\0]*)\0//) {
					my $frame = $1;
					print $out $frame, "\0";
					if ($frame =~ /\ACONNECT\n/) {
						syswrite($c, $reply eq 'CONNECTED' ? "CONNECTED\nsession:s1\n\n\0" : "ERROR\nmessage:bad login\n\nno\0");
					}
				}
			}
		}
		CORE::exit(0);
	}
	my $port = $l->sockport;
	close $l;
	return ($port, sub {
		Time::HiRes::sleep(0.3);
		kill 'TERM', $pid;
		waitpid($pid, 0);
		open(my $in, '<:raw', $log->filename) or die $!;
		my $all = do { local $/; <$in> } // '';
		my @frames;
		for my $f (split /\0/, $all) {
			my ($head, $body) = split /\n\n/, $f, 2;
			my ($cmd, @h) = split /\n/, $head;
			push @frames, [$cmd, { map { split /:/, $_, 2 } @h }, $body // ''];
		}
		return \@frames;
	});
}

subtest 'KDB text frames as the EPrints probes sent them' => sub {
	my ($port, $stop) = broker('CONNECTED');
	my $tb = TraceBridge->new(transport => 'stomp', port => $port, hostname => 'vm', login => 'hello', passcode => 'there',
		report_drops => 0);
	$tb->entry('search_book', 'realclients.perl.Bookstore');
	$tb->entry('get_book', 'Catalog');
	$tb->failed('get_book', 'Catalog', "no such book; sorry\n");
	$tb->exit('search_book', 'realclients.perl.Bookstore');
	ok($tb->close, 'closed');
	my $frames = $stop->();
	is($frames->[0][0], 'CONNECT', 'CONNECT first');
	is_deeply([@{ $frames->[0][1] }{qw(login passcode)}], [qw(hello there)], 'credentials');
	my @sends = grep { $_->[0] eq 'SEND' } @$frames;
	is(scalar @sends, 5, 'one message per record');
	is_deeply([map { $_->[1]{destination} } @sends], [('/queue/kieker.tools.bridge') x 5], 'the probes\' queue');
	my @bodies = map { $_->[2] } @sends;
	is($bodies[0], "3;$$;0;0;vm;0;0", 'the probes\' trace line');
	like($bodies[1], qr/\A1;\d{19};$$;0;search_book;realclients\.perl\.Bookstore\z/, 'entry');
	like($bodies[3], qr/\A4;\d+;$$;2;get_book;Catalog;no such book\\; sorry\z/, 'failed, escaped');
	like($bodies[4], qr/\A2;\d+;$$;3;search_book;realclients\.perl\.Bookstore\z/, 'exit');
	is($frames->[-1][0], 'DISCONNECT', 'DISCONNECT last');
	is($tb->stats->{sent}, 5, 'stats');
};

subtest 'the probes\' three ids only; several records per message' => sub {
	my ($port, $stop) = broker('CONNECTED');
	my $tb = TraceBridge->new(transport => 'stomp', port => $port, failed_id => 0, records_per_message => 3,
		destination => '/queue/other', report_drops => 0);
	$tb->entry('a', 'C');
	$tb->failed('a', 'C', 'boom');
	$tb->close;
	my @sends = grep { $_->[0] eq 'SEND' } @{ $stop->() };
	# The first record is sent at once (it opens the connection), the rest together.
	is_deeply([map { scalar split /\n/, $_->[2] } @sends], [1, 2], 'records per message');
	my @lines = map { split /\n/, $_->[2] } @sends;
	like($lines[2], qr/\A2;\d+;$$;1;a;C\z/, 'failed sent as an exit');
	is($sends[0][1]{destination}, '/queue/other', 'destination');
};

subtest 'a refused login is a connection failure' => sub {
	my ($port, $stop) = broker('ERROR');
	my $tb = TraceBridge->new(transport => 'stomp', port => $port, report_drops => 0);
	$tb->entry('a', 'C');
	$tb->exit('a', 'C');
	ok(!$tb->close, 'close reports the loss');
	$stop->();
	my $s = $tb->stats;
	is_deeply([@$s{qw(recorded sent dropped)}], [3, 0, 3], 'dropped');
	like($s->{last_error}, qr/no CONNECTED frame: bad login/, 'last_error');
};

subtest 'no broker: quick, counted' => sub {
	my $tb = TraceBridge->new(transport => 'stomp', port => closed_port(), report_drops => 0);
	my $t0 = Time::HiRes::time();
	for (1 .. 500) { $tb->entry('a', 'C'); $tb->exit('a', 'C') }
	$tb->close;
	cmp_ok(Time::HiRes::time() - $t0, '<', 5, 'never blocks long');
	my $s = $tb->stats;
	is_deeply([@$s{qw(recorded sent dropped)}], [1500, 0, 1500], 'all dropped');
	like($s->{last_error}, qr/Connection refused/, 'last_error');
	unlike($s->{last_error}, qr/ line \d+/, 'without source locations');
};

done_testing;
