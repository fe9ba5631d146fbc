package TraceBridge::TCP;

# The TCP transport: Kieker binary records (TraceBridge::Kieker) over one
# non-blocking TCP connection to a tracebridge kieker-tcp receiver (or any
# Kieker single-socket TCP reader). Core Perl only.
#
# Records are encoded into an output buffer when they are recorded and
# written without blocking when the buffer holds flush_bytes or
# flush_interval seconds have passed since the last write; what the socket
# does not take stays buffered. A record that finds max_buffer bytes
# buffered is dropped and counted. Connecting is non-blocking too: a
# connection in progress is checked at the next write; a failed one is
# retried with exponential back-off (backoff_min doubling to backoff_max)
# while records keep being buffered up to the bound, so a restarting
# bridge loses nothing. A connection that fails while writing drops what
# was still buffered (counted as unreachable); every connection starts a
# new string registry, ids from 0. flush makes one immediate attempt
# whatever the back-off and waits (select) at most its timeout; what it
# cannot send is dropped and counted. Nothing here dies or raises SIGPIPE.

use strict;
use warnings;

use Errno qw(EAGAIN EWOULDBLOCK EINPROGRESS EINTR);
use IO::Socket::INET ();
use Socket qw(SOL_SOCKET SO_ERROR);
use Time::HiRes ();

use TraceBridge::Kieker qw(:all);

my @CLASS = (TRACE_METADATA, BEFORE_OPERATION_EVENT, AFTER_OPERATION_EVENT, AFTER_OPERATION_FAILED_EVENT);

my $NOSIGNAL = eval { Socket::MSG_NOSIGNAL() } // 0;

sub new {
	my ($class, %o) = @_;
	my $self = bless {
		host           => $o{host} // '127.0.0.1',
		port           => $o{port} // 10133,
		max_buffer     => $o{max_buffer} // 4 << 20,
		flush_bytes    => $o{flush_bytes} // 64 << 10,
		flush_interval => $o{flush_interval} // 0.2,
		connect_timeout => $o{connect_timeout} // 1,
		backoff_min    => $o{backoff_min} // 0.1,
		backoff_max    => $o{backoff_max} // 10,
		max_registry   => $o{max_registry} // 1 << 20,
		logging_timestamps => $o{logging_timestamps} // 0,
	}, $class;
	$self->_reset;
	return $self;
}

# _reset forgets the connection, the buffer and the counters (new, and in
# the child after a fork).
sub _reset {
	my ($self) = @_;
	$self->{sock}       = undef;
	$self->{connecting} = 0;
	$self->{buf}        = '';
	$self->{pending}    = 0;       # records with bytes in buf
	# The registry is reset in place: event_sub's closures hold it.
	$self->{reg} ? $self->{reg}->reset : ($self->{reg} = TraceBridge::Kieker->new);
	$self->{next_attempt} = 0;
	$self->{backoff}    = $self->{backoff_min};
	$self->{last_write} = 0;
	$self->{interval_ns} = int($self->{flush_interval} * 1e9);
	$self->{$_} = 0 for qw(recorded sent dropped_full dropped_unreachable bytes_sent connects connect_failures);
	$self->{last_error} = undef;
	$self->{closed}     = 0;
}

sub after_fork { $_[0]->_reset }

# record($kind, $timestamp_ns, @fields): encodes one record into the
# buffer and writes when it is time. $timestamp_ns is the record's time
# (used for the logging timestamp if asked, and to pace writes).
sub record {
	my $self = shift;
	my $kind = shift;
	my $now  = shift;
	$self->{recorded}++;
	my $buf = \$self->{buf};
	if (length($$buf) >= $self->{max_buffer}) {
		$self->{dropped_full}++;
		return 0;
	}
	my $reg = $self->{reg};
	if (($kind == BEFORE || $kind == AFTER) && !$self->{logging_timestamps}) {
		# The common case inline: an event whose strings are known.
		my $ids = $reg->{ids};
		my $c = $ids->{ $CLASS[$kind] } // $reg->id($buf, $CLASS[$kind]);
		my $o = $ids->{ $_[3] // '' } // $reg->id($buf, $_[3]);
		my $s = $ids->{ $_[4] // '' } // $reg->id($buf, $_[4]);
		$$buf .= pack('Nq>q>q>l>NN', $c, -1, $_[0], $_[1], $_[2], $o, $s);
	} elsif ($kind >= META && $kind <= FAILED) {
		$reg->append_lts($buf, $kind, $self->{logging_timestamps} ? $now : NO_TIMESTAMP, @_);
	} else {
		$self->{last_error} = "unknown record kind $kind";
		$self->{dropped_full}++;    # counted with the records that could not be queued
		return 0;
	}
	$self->{pending}++;
	if (length($$buf) >= $self->{flush_bytes} || $now - $self->{last_write} >= $self->{interval_ns}) {
		$self->{last_write} = $now;
		$self->pump(0);
	}
	return 1;
}

# event_sub returns a code reference doing what record does, faster for
# the probes' hot path: ->($kind, $timestamp_ns, @fields).
sub event_sub {
	my ($self) = @_;
	my $buf = \$self->{buf};
	my $reg = $self->{reg};
	my $ids = $reg->{ids};
	my ($max, $fb, $iv) = @$self{qw(max_buffer flush_bytes interval_ns)};
	return sub { $self->record(@_) } if $self->{logging_timestamps};
	return sub {
		my $kind = $_[0];
		return $self->record(@_) unless $kind == BEFORE || $kind == AFTER;
		$self->{recorded}++;
		if (length($$buf) >= $max) {
			$self->{dropped_full}++;
			return 0;
		}
		my $c = $ids->{ $CLASS[$kind] } // $reg->id($buf, $CLASS[$kind]);
		my $o = $ids->{ $_[5] // '' } // $reg->id($buf, $_[5]);
		my $s = $ids->{ $_[6] // '' } // $reg->id($buf, $_[6]);
		$$buf .= pack('Nq>q>q>l>NN', $c, -1, $_[2], $_[3], $_[4], $o, $s);
		$self->{pending}++;
		if (length($$buf) >= $fb || $_[1] - $self->{last_write} >= $iv) {
			$self->{last_write} = $_[1];
			$self->pump(0);
		}
		return 1;
	};
}

# pump($forced): connects if due (or forced) and writes what the socket
# takes without blocking.
sub pump {
	my ($self, $forced) = @_;
	return if $self->{closed} && !$forced;
	unless ($self->{sock}) {
		return unless $forced || Time::HiRes::time() >= $self->{next_attempt};
		$self->_connect or return;
	}
	if ($self->{connecting}) {
		return unless $self->_connected(0);
	}
	$self->_write;
}

sub _connect {
	my ($self) = @_;
	local $!;
	my $s = IO::Socket::INET->new(PeerAddr => $self->{host}, PeerPort => $self->{port}, Proto => 'tcp', Blocking => 0);
	if (!$s) {
		$self->_failed_connect("connect to $self->{host}:$self->{port}: " . ($! || $@ || 'failed'));
		return 0;
	}
	$self->{sock}       = $s;
	$self->{connecting} = 1;
	$self->{deadline}   = Time::HiRes::time() + $self->{connect_timeout};
	return 1;
}

# _connected($wait): checks a connection in progress, waiting up to $wait
# seconds. Returns true once it is established.
sub _connected {
	my ($self, $wait) = @_;
	my $s = $self->{sock};
	my $w = '';
	vec($w, fileno($s), 1) = 1;
	my $n = select(undef, my $wout = $w, undef, $wait);
	if ($n > 0) {
		my $err = unpack('i', getsockopt($s, SOL_SOCKET, SO_ERROR) // pack('i', 0));
		if ($err) {
			local $! = $err;
			$self->_drop_connection("connect to $self->{host}:$self->{port}: $!");
			$self->{connect_failures}++;
			return 0;
		}
		$self->{connecting} = 0;
		$self->{connects}++;
		$self->{backoff} = $self->{backoff_min};
		return 1;
	}
	if (Time::HiRes::time() >= $self->{deadline}) {
		$self->_drop_connection("connect to $self->{host}:$self->{port}: timed out");
		$self->{connect_failures}++;
	}
	return 0;
}

sub _failed_connect {
	my ($self, $err) = @_;
	$self->{connect_failures}++;
	$self->{last_error} = $err;
	$self->_schedule_retry;
}

sub _schedule_retry {
	my ($self) = @_;
	$self->{next_attempt} = Time::HiRes::time() + $self->{backoff};
	$self->{backoff} *= 2;
	$self->{backoff} = $self->{backoff_max} if $self->{backoff} > $self->{backoff_max};
}

# _drop_connection closes the socket. Bytes of a connection that was
# established are lost with it (their records count as unreachable) and
# the next connection starts a new registry; while still connecting,
# nothing was written and the buffer stays for the next attempt.
sub _drop_connection {
	my ($self, $err) = @_;
	my $was_up = !$self->{connecting};
	CORE::close($self->{sock}) if $self->{sock};
	$self->{sock}       = undef;
	$self->{connecting} = 0;
	$self->{last_error} = $err;
	if ($was_up) {
		$self->{dropped_unreachable} += $self->{pending};
		$self->{pending} = 0;
		$self->{buf}     = '';
		$self->{reg}->reset;
	}
	$self->_schedule_retry;
}

sub _write {
	my ($self) = @_;
	my $s = $self->{sock};
	while (length $self->{buf}) {
		local $!;
		my $n = send($s, $self->{buf}, $NOSIGNAL);
		if (!defined $n) {
			return if $! == EAGAIN || $! == EWOULDBLOCK;
			next if $! == EINTR;
			$self->_drop_connection("send to $self->{host}:$self->{port}: $!");
			return;
		}
		$self->{bytes_sent} += $n;
		substr($self->{buf}, 0, $n, '');
	}
	$self->{sent} += $self->{pending};
	$self->{pending} = 0;
	if ($self->{reg}->len > $self->{max_registry}) {
		# A fresh connection bounds the registry's memory.
		CORE::close($s);
		$self->{sock} = undef;
		$self->{reg}->reset;
	}
}

# flush($timeout): sends everything buffered, waiting at most $timeout
# seconds; drops (and counts) what cannot be sent. Returns true when the
# buffer was emptied.
sub flush {
	my ($self, $timeout) = @_;
	$timeout //= 2;
	my $deadline = Time::HiRes::time() + $timeout;
	return 1 unless length $self->{buf};
	unless ($self->{sock}) {
		$self->_connect;
	}
	while ($self->{sock} && $self->{connecting}) {
		my $left = $deadline - Time::HiRes::time();
		last if $left <= 0;
		$self->{deadline} = $deadline if $self->{deadline} > $deadline;
		$self->_connected($left > 0.05 ? 0.05 : $left);
	}
	while ($self->{sock} && !$self->{connecting} && length $self->{buf}) {
		$self->_write;
		last unless length $self->{buf} && $self->{sock};
		my $left = $deadline - Time::HiRes::time();
		last if $left <= 0;
		my $w = '';
		vec($w, fileno($self->{sock}), 1) = 1;
		select(undef, $w, undef, $left > 0.05 ? 0.05 : $left);
	}
	return 1 unless length $self->{buf};
	$self->{last_error} //= "flush to $self->{host}:$self->{port}: timed out";
	$self->{dropped_unreachable} += $self->{pending};
	$self->{pending} = 0;
	$self->{buf}     = '';
	if ($self->{sock}) {
		# Part of a record may have gone out: this stream cannot go on.
		CORE::close($self->{sock});
		$self->{sock}       = undef;
		$self->{connecting} = 0;
	}
	$self->{reg}->reset;
	return 0;
}

# close($timeout): flushes and closes the connection; later records are
# counted and dropped. Safe to call twice.
sub close {
	my ($self, $timeout) = @_;
	return 1 if $self->{closed};
	my $ok = $self->flush($timeout);
	CORE::close($self->{sock}) if $self->{sock};
	$self->{sock}   = undef;
	$self->{closed} = 1;
	return $ok;
}

sub stats {
	my ($self) = @_;
	my $dropped = $self->{dropped_full} + $self->{dropped_unreachable};
	return {
		recorded            => $self->{recorded},
		sent                => $self->{sent},
		queued              => $self->{pending},
		dropped             => $dropped,
		dropped_queue_full  => $self->{dropped_full},
		dropped_unreachable => $self->{dropped_unreachable},
		bytes_sent          => $self->{bytes_sent},
		connected           => ($self->{sock} && !$self->{connecting}) ? 1 : 0,
		connects            => $self->{connects},
		connect_failures    => $self->{connect_failures},
		last_error          => $self->{last_error},
		bridge              => "$self->{host}:$self->{port}",
	};
}

1;
