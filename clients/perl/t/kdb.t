# KDB text lines as the EPrints probes sent them.
use strict;
use warnings;
use FindBin ();
use lib "$FindBin::Bin/../lib";

use Test::More;
use TraceBridge::KDB qw(line escape);

is(line(3, [qw(n n s s n n)], 11727, 0, '0', 'vm', 0, 0), '3;11727;0;0;vm;0;0', 'the probes\' trace line');
is(line(1, [qw(n n n s s)], 1795312705697789000, 11727, 0, 'search_book', 'realclients.perl.Bookstore'),
	'1;1795312705697789000;11727;0;search_book;realclients.perl.Bookstore', 'an entry line as the probes wrote it');
is(line(4, [qw(n n n s s s)], 1, 2, 3, 'a;b', 'c\\d', "e\r\nf\0g"), "4;1;2;3;a\\;b;c\\\\d;e\\\r\\\nfg", 'escapes');
is(escape("\x{e9}"), "\xc3\xa9", 'UTF-8');
is(escape(undef), '', 'undef');
is(line(2, [qw(n n)], undef, '12abc'), '2;0;12', 'numbers');

done_testing;
