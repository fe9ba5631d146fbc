package TraceBridge::STOMP;

# The STOMP transport: KDB text records (TraceBridge::KDB) sent with
# Debian's Net::Stomp (libnet-stomp-perl) to a broker queue, by default
# /queue/kieker.tools.bridge, as the EPrints Perl probes did; a tracebridge
# stomp-client receiver with the matching mapping file consumes them.
#
# Record ids (option ids): entry 1, exit 2, trace 3 as the EPrints probes
# used, failed 4 (tracebridge's addition; the mapping file must name
# AfterOperationFailedEvent for it). With failed => 0 a failed call is sent
# as a plain exit (id 2), for a bridge with the probes' three-line mapping.
#
# Messages are queued in memory (at most max_queue records; more are
# dropped and counted) and sent when flush_count are queued or
# flush_interval seconds have passed, each message holding up to
# records_per_message records, one per line (1, as the probes did; a
# tracebridge accepts more). Net::Stomp connects and writes blocking: a
# connection attempt is bounded by connect_timeout, a write by
# send_timeout (SO_SNDTIMEO), and a failed attempt is retried only after a
# back-off (backoff_min doubling to backoff_max). A message whose send
# fails is dropped and counted; the rest stay queued. Nothing here dies.
# Net::Stomp is loaded when the first connection is made: without it every
# record is dropped and counted, with the reason in last_error.

use strict;
use warnings;

use Socket qw(SOL_SOCKET SO_SNDTIMEO);
use Time::HiRes ();

use TraceBridge::Kieker qw(META BEFORE AFTER FAILED);
use TraceBridge::KDB ();

my %TYPES = (
	META()   => [qw(n n s s n n)],
	BEFORE() => [qw(n n n s s)],
	AFTER()  => [qw(n n n s s)],
	FAILED() => [qw(n n n s s s)],
);

sub new {
	my ($class, %o) = @_;
	my $ids = $o{ids} // {};
	my $self = bless {
		host            => $o{host} // '127.0.0.1',
		port            => $o{port} // 61613,
		login           => $o{login} // 'guest',
		passcode        => $o{passcode} // 'guest',
		vhost           => $o{vhost},
		destination     => $o{destination} // '/queue/kieker.tools.bridge',
		max_queue       => $o{max_queue} // 100000,
		flush_count     => $o{flush_count} // 100,
		flush_interval  => $o{flush_interval} // 0.2,
		records_per_message => $o{records_per_message} // 1,
		connect_timeout => $o{connect_timeout} // 1,
		send_timeout    => $o{send_timeout} // 5,
		backoff_min     => $o{backoff_min} // 0.1,
		backoff_max     => $o{backoff_max} // 10,
		id              => {
			META()   => $ids->{trace} // 3,
			BEFORE() => $ids->{entry} // 1,
			AFTER()  => $ids->{exit} // 2,
			FAILED() => exists $ids->{failed} ? $ids->{failed} : ($o{failed_id} // 4),
		},
	}, $class;
	$self->_reset;
	return $self;
}

sub _reset {
	my ($self) = @_;
	$self->{stomp}        = undef;
	$self->{queue}        = [];
	$self->{next_attempt} = 0;
	$self->{backoff}      = $self->{backoff_min};
	$self->{last_write}   = 0;
	$self->{interval_ns}  = int($self->{flush_interval} * 1e9);
	$self->{$_} = 0 for qw(recorded sent dropped_full dropped_unreachable bytes_sent connects connect_failures);
	$self->{last_error} = undef;
	$self->{closed}     = 0;
}

# after_fork forgets the parent's connection (without disturbing it) and
# queue.
sub after_fork { $_[0]->_reset }

# record($kind, $timestamp_ns, @fields) queues one record as a KDB line.
sub record {
	my $self = shift;
	my $kind = shift;
	my $now  = shift;
	$self->{recorded}++;
	my $q = $self->{queue};
	if (@$q >= $self->{max_queue}) {
		$self->{dropped_full}++;
		return 0;
	}
	my $id = $self->{id}{$kind};
	if ($kind == FAILED && !$id) {    # the probes' mapping has no failed event: an exit
		$kind = AFTER;
		$id   = $self->{id}{$kind};
		splice(@_, 5);
	}
	push @$q, TraceBridge::KDB::line($id, $TYPES{$kind}, @_);
	if (@$q >= $self->{flush_count} || $now - $self->{last_write} >= $self->{interval_ns}) {
		$self->{last_write} = $now;
		$self->pump(0);
	}
	return 1;
}

# pump($forced) connects if due (or forced) and sends what is queued.
sub pump {
	my ($self, $forced) = @_;
	return if $self->{closed} && !$forced;
	my $q = $self->{queue};
	return unless @$q;
	unless ($self->{stomp}) {
		return unless $forced || Time::HiRes::time() >= $self->{next_attempt};
		$self->_connect or return;
	}
	my $per = $self->{records_per_message} > 0 ? $self->{records_per_message} : 1;
	while (@$q) {
		my @batch = splice(@$q, 0, $per);
		my $body  = join("\n", @batch);
		my $ok    = eval {
			local $SIG{PIPE} = 'IGNORE';
			$self->{stomp}->send({ destination => $self->{destination}, body => $body });
			1;
		};
		if (!$ok) {
			my $err = _clean($@);
			$self->{dropped_unreachable} += @batch;
			$self->_drop_connection("send to $self->{host}:$self->{port}: $err");
			return;
		}
		$self->{sent} += @batch;
		$self->{bytes_sent} += length $body;
	}
}

sub _connect {
	my ($self) = @_;
	my $stomp;
	my $ok = eval {
		require Net::Stomp;
		local $SIG{PIPE} = 'IGNORE';
		$stomp = Net::Stomp->new({
			hostname                   => $self->{host},
			port                       => $self->{port},
			timeout                    => $self->{connect_timeout},
			initial_reconnect_attempts => 1,
			reconnect_attempts         => 1,
			connect_delay              => 0,
			reconnect_on_fork          => 0,
		});
		my %h = (login => $self->{login}, passcode => $self->{passcode});
		$h{host} = $self->{vhost} if defined $self->{vhost};
		my $frame = $stomp->connect(\%h);
		die "no CONNECTED frame" . ($frame && $frame->headers && $frame->headers->{message} ? ": " . $frame->headers->{message} : '') . "\n"
			unless $frame && $frame->command eq 'CONNECTED';
		if (my $s = $stomp->socket) {
			my $sec = int($self->{send_timeout});
			setsockopt($s, SOL_SOCKET, SO_SNDTIMEO, pack('l!l!', $sec, int(($self->{send_timeout} - $sec) * 1e6)));
		}
		1;
	};
	if (!$ok) {
		my $err = _clean($@);
		$self->{connect_failures}++;
		$self->{last_error} = "connect to $self->{host}:$self->{port}: $err";
		$self->_close_stomp($stomp, 0);
		$self->_schedule_retry;
		return 0;
	}
	$self->{stomp} = $stomp;
	$self->{connects}++;
	$self->{backoff} = $self->{backoff_min};
	return 1;
}

# _clean turns Net::Stomp's death into one line without source locations.
sub _clean {
	my ($err) = @_;
	$err = 'unknown error' unless defined $err && length $err;
	$err =~ s/ at \S+ line \d+\.?//g;
	$err =~ s/\s+/ /g;
	$err =~ s/\s+\z//;
	return $err;
}

sub _schedule_retry {
	my ($self) = @_;
	$self->{next_attempt} = Time::HiRes::time() + $self->{backoff};
	$self->{backoff} *= 2;
	$self->{backoff} = $self->{backoff_max} if $self->{backoff} > $self->{backoff_max};
}

sub _drop_connection {
	my ($self, $err) = @_;
	$self->{last_error} = $err;
	$self->_close_stomp($self->{stomp}, 0);
	$self->{stomp} = undef;
	$self->_schedule_retry;
}

sub _close_stomp {
	my ($self, $stomp, $graceful) = @_;
	return unless $stomp;
	eval {
		local $SIG{PIPE} = 'IGNORE';
		if ($graceful) {
			$stomp->disconnect;
		} elsif (my $s = $stomp->socket) {
			CORE::close($s);
		}
		1;
	};
}

# flush($timeout): sends everything queued now (one immediate connection
# attempt whatever the back-off); drops and counts what cannot be sent.
# Net::Stomp blocks: the wait is bounded by connect_timeout and
# send_timeout rather than by $timeout.
sub flush {
	my ($self, $timeout) = @_;
	$self->pump(1);
	my $q = $self->{queue};
	return 1 unless @$q;
	$self->{dropped_unreachable} += @$q;
	@$q = ();
	return 0;
}

# close($timeout): flushes, sends DISCONNECT and closes. Safe to call twice.
sub close {
	my ($self, $timeout) = @_;
	return 1 if $self->{closed};
	my $ok = $self->flush($timeout);
	$self->_close_stomp($self->{stomp}, 1);
	$self->{stomp}  = undef;
	$self->{closed} = 1;
	return $ok;
}

sub stats {
	my ($self) = @_;
	return {
		recorded            => $self->{recorded},
		sent                => $self->{sent},
		queued              => scalar @{ $self->{queue} },
		dropped             => $self->{dropped_full} + $self->{dropped_unreachable},
		dropped_queue_full  => $self->{dropped_full},
		dropped_unreachable => $self->{dropped_unreachable},
		bytes_sent          => $self->{bytes_sent},
		connected           => $self->{stomp} ? 1 : 0,
		connects            => $self->{connects},
		connect_failures    => $self->{connect_failures},
		last_error          => $self->{last_error},
		bridge              => "stomp://$self->{host}:$self->{port}$self->{destination}",
	};
}

1;
