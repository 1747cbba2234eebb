"""lab replay reviews every dump before anything is built: what iptables-save, nft list ruleset, ipset save and
ipvsadm -Sn never write (and what would make the tools act outside the lab) is refused with its file and line;
a file that is no regular file, or too large, is refused unread."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.timelimit import time_limit

from lab.cli import parser
from lab.describe import readfile
from lab.install.tools import InstallError
from lab.replay.dump import DumpError
from lab.replay.run import replay_from_args

REPO = Path(__file__).resolve().parents[2]
RULES = (REPO / "tests/fixtures/replay/two-endpoints.rules").read_text()
NFT = (REPO / "tests/fixtures/replay/two-endpoints.nft").read_text()
PROBE = ["--node-ip", "192.168.0.2", "--pod-cidr", "10.0.0.0/8", "--from", "10.0.1.9", "--to", "172.30.0.41:80"]


def refused(tmp_path: Path, option: str, dump: str, *more: str) -> str:
    (tmp_path / "rules").write_text(RULES)
    path = tmp_path / option.strip("-")
    path.write_text(dump)
    rules = [] if option in ("--rules", "--nft") else ["--rules", str(tmp_path / "rules")]
    with pytest.raises(InstallError) as caught:
        replay_from_args(parser().parse_args(["replay", *rules, option, str(path), *more, *PROBE]))
    return str(caught.value)


def nft_with(line: str) -> str:
    return f"{NFT}\n{line}\n"


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ('include "/etc/shadow"', "`include` makes nft read another file"),
        ("define ext = 10.0.0.1", "`define` (a variable) is no part of `nft list ruleset`'s output"),
        ("redefine ext = 10.0.0.1", "`redefine` (a variable)"),
        ("undefine ext", "`undefine` (a variable)"),
        ("add rule ip kube-proxy services ip daddr $ext drop", "`$ext` holds a variable ($)"),
        ("add rule ip kube-proxy services ip daddr 10.0.0.1$ext drop", "`10.0.0.1$ext` holds a variable ($)"),
        ('table ip t { include "/etc/passwd" }', "`include` makes nft read another file"),
        ("list ruleset", "`list` is no part of a ruleset"),
        ("monitor", "`monitor` is no part of a ruleset"),
        ("add rule ip kube-proxy services osf name Linux drop", "`osf` makes nft read the OS fingerprint file"),
        ('add rule ip t c socket cgroupv2 level 1 "user.slice" drop', "`socket cgroupv2` makes nft look up a path"),
        ('add secmark ip t s "system_u:object_r:x_t:s0"', "`secmark` labels packets"),
        ('add rule ip t c meta secmark set "s"', "`secmark` labels packets"),
        ('add rule ip t c drop comment "unclosed', 'a string opened with " is not closed on its line'),
        # nft's scanner reads a hex number, then the keyword (tried: nft -c opened /etc/nftables/osf/pf.os)
        ('add rule ip kube-proxy services meta mark set 0xaosf name "Linux" drop', "`0xaosf` holds `osf`, which"),
        ("add rule ip kube-proxy services meta mark 1,osf drop", "`1,osf` holds `osf`, which nft reads as a word"),
        ('add rule ip kube-proxy services ab:cd-osf name "x" drop', "`ab:cd-osf` holds `osf`"),  # a classid, `-`, osf
        ('add rule ip kube-proxy services socket cgroupv2 level 1 "/"', "`socket cgroupv2` makes nft look up a path"),
    ],
)
def test_nft_what_no_ruleset_holds_is_refused_with_its_line(tmp_path, line, said):
    message = refused(tmp_path, "--nft", nft_with(line))
    assert message.startswith(f"--nft {tmp_path / 'nft'} line {NFT.count(chr(10)) + 2}: {said}"), message


def test_an_include_after_a_backslash_newline_is_refused_on_its_line(tmp_path):
    """nft joins a line ending in a backslash to the next (`include \\` then `"FILE"` includes FILE; tried)."""
    message = refused(tmp_path, "--nft", nft_with('add rule ip kube-proxy services drop \\\ninclude "/etc/shadow"'))
    assert message.startswith(f"--nft {tmp_path / 'nft'} line {NFT.count(chr(10)) + 3}: `include` makes nft"), message


def test_nft_names_that_end_in_a_keyword_and_keywords_in_another_case_are_harmless():
    """A name starting a word runs on to its end (a Service port named osf, in kube-proxy's chain name); nft's
    keywords have one case (tried: nft -c reads `Include "FILE"` as a name, a syntax error, and reads no file)."""
    from lab.replay.review import review_nft

    review_nft(nft_with("add rule ip kube-proxy services jump service-ABCD-ns/web/tcp/osf"))
    review_nft(nft_with('table ip kube-proxy { Include "/etc/shadow" }'))


def test_nft_keywords_inside_strings_and_comments_are_harmless():
    from lab.replay.review import review_nft

    review_nft(nft_with('add rule ip kube-proxy services drop comment "include $x define osf" # include "/x"'))
    review_nft(nft_with("add rule ip kube-proxy services ip daddr { 10.0.0.0/8 } drop"))


@pytest.mark.parametrize(
    ("rule", "said"),
    [
        ("-A KUBE-SERVICES -m bpf --object-pinned /sys/fs/bpf/x -j DROP", "-m bpf --object-pinned opens"),
        ("-A KUBE-SERVICES -j LED --led-trigger-id x", "-j LED creates a LED trigger"),
        ("-A KUBE-SERVICES -j IDLETIMER --timeout 5 --label x", "-j IDLETIMER creates a timer file"),
        ("-A KUBE-SERVICES -j AUDIT --type drop", "-j AUDIT writes to this machine's audit log"),
        ("-A KUBE-SERVICES -m cgroup --path user.slice -j DROP", "-m cgroup --path resolves a path"),
        ('-A KUBE-SERVICES -m comment --comment "x -j DROP', 'a string opened with " is not closed on its line'),
        ("include /etc/shadow", "not a line of iptables-save"),
        ('-A KUBE-SERVICES "-"j LED', 'a quoted string joined to the word after it: "-"j LED'),  # iptables reads -j
        ('-A KUBE-SERVICES -m comment --comment x" -j "LED', 'a quote or backslash inside the word x"'),
        # iptables 1.8.9 takes each of these (tried: iptables-restore --test loads LED, the cgroup path, the bpf object)
        ("-A KUBE-SERVICES --jum LED --led-trigger-id x", "`--jum` is an abbreviation (of --jump): iptables-save"),
        ("-A KUBE-SERVICES --go KUBE-SVC-X", "`--go` is an abbreviation (of --goto)"),
        ("-A KUBE-SERVICES --mat cgroup --path user.slice", "`--mat` is an abbreviation (of --match, --match-set)"),
        ("-A KUBE-SERVICES -m cgroup --pat user.slice -j DROP", "`--pat` is an abbreviation (of --path)"),
        ("-A KUBE-SERVICES -m bpf --obj /sys/fs/bpf/x -j DROP", "`--obj` is an abbreviation (of --object-pinned)"),
        ("-A KUBE-SERVICES -p tcp --dpo 80 -j DROP", "`--dpo` is an abbreviation (of --dport, --dports)"),
        ("-A KUBE-SERVICES --jump=LED", "`--jump=LED` joins an option to its value with `=`: iptables-save writes"),
        ("-A KUBE-SERVICES -m cgroup --path=user.slice", "`--path=user.slice` joins an option to its value"),
        ("-A KUBE-SERVICES -jIDLETIMER --timeout 5", "`-jIDLETIMER` joins a short option to another or to its value"),
        ("-A KUBE-SERVICES -mcgroup --path user.slice", "`-mcgroup` joins a short option to another or to its value"),
        ("-A KUBE-SERVICES -vjLED", "`-vjLED` joins a short option to another or to its value"),
        # a quoted word is an option to getopt_long all the same: read in every spelling
        ('-A KUBE-SERVICES "-jLED"', "-j LED creates a LED trigger"),
        ('-A KUBE-SERVICES "--jum" LED', "-j LED creates a LED trigger"),
        ('-A KUBE-SERVICES "--jump=AUDIT" --type drop', "-j AUDIT writes to this machine's audit log"),
        ('-A KUBE-SERVICES "-m" cgroup "--pat" user.slice', "-m cgroup --path resolves a path"),
        ('-A KUBE-SERVICES -m bpf "--obj" /sys/fs/bpf/x', "-m bpf --object-pinned opens"),
        ('-A KUBE-SERVICES "-m" "geoip" --src-cc XX', "-m geoip reads its database"),
        # iptables reads --modprobe in a rule, and runs that program to load a module
        ("-A KUBE-SERVICES -M /tmp/x -j ACCEPT", "--modprobe (-M) names a program iptables runs, as root"),
        ("-A KUBE-SERVICES --modprobe /tmp/x -j ACCEPT", "--modprobe (-M) names a program iptables runs"),
        ('-A KUBE-SERVICES "-M/tmp/x" -j ACCEPT', "--modprobe (-M) names a program iptables runs"),
        ('-A KUBE-SERVICES "--modp" /tmp/x -j ACCEPT', "--modprobe (-M) names a program iptables runs"),
    ],
)
def test_rules_that_reach_outside_the_lab_in_any_spelling_are_refused_with_their_line(tmp_path, rule, said):
    dump = RULES.replace("COMMIT", f"{rule}\nCOMMIT", 1)
    line = dump.splitlines().index(rule) + 1
    message = refused(tmp_path, "--rules", dump)
    assert message.startswith(f"--rules {tmp_path / 'rules'} line {line}: {said}"), message


def test_rule_words_inside_a_quoted_comment_are_harmless():
    from lab.replay.review import review_iptables

    review_iptables(RULES.replace("COMMIT", '-A KUBE-SERVICES -m comment --comment "-j LED COMMIT" -j RETURN\nCOMMIT'))
    review_iptables(RULES.replace("COMMIT", "-A KUBE-SERVICES -j LOG --log-prefix x\nCOMMIT", 1))


@pytest.mark.parametrize(
    ("dump", "said"),
    [
        ("create KUBE-CLUSTER-IP hash:ip,port family inet\nsave -file /tmp/x\n", "line 2: `save`: an ipset save"),
        ("create S hash:ip\nadd S 10.0.0.1 -fi /etc/shadow\n", "line 2: -file makes ipset read or write a file"),
        # ipset toggles quotes wherever they stand and escapes none: its words here are `a\`, -file, /etc/shadow, `\b`
        ('create S hash:ip comment\nadd S 10.0.0.1 comment "a\\" -file /etc/shadow \\"b"\n', "line 2: -file makes"),
    ],
)
def test_ipset_lines_no_save_holds_are_refused(tmp_path, dump, said):
    message = refused(tmp_path, "--ipsets", dump)
    assert message.startswith(f"--ipsets {tmp_path / 'ipsets'} {said}"), message


def test_ipset_words_inside_quotes_are_harmless():
    from lab.replay.review import review_ipsets

    review_ipsets('create S hash:ip comment\nadd S 10.0.0.1 comment "-file /etc/shadow"\n')


def test_ipvsadm_lines_no_save_holds_are_refused(tmp_path):
    dump = "-A -t 10.96.0.1:80 -s rr\n--start-daemon master --mcast-interface eth0\n"
    message = refused(tmp_path, "--ipvs", dump)
    assert message.startswith(f"--ipvs {tmp_path / 'ipvs'} line 2: `--start-daemon`: ipvsadm -Sn writes only"), message


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("-A -t 10.96.0.1:21 -s ftp", "-s ftp: not one of the kernel's schedulers"),  # request_module("ip_vs_ftp")
        ("-A -t 10.96.0.1:5060 -s rr --pe sip", "`--pe`: no option ipvsadm -Sn writes"),  # ip_vs_pe_sip
        ("-A -t example.com:http -s rr", "-t example.com:http: expected ADDRESS:PORT in numbers"),
        ("-A -t [fd00::1%x]:80 -s rr", "expected ADDRESS:PORT in numbers"),
        ("-A -t 10.96.0.1:80 -sftp", "`-sftp`: no option ipvsadm -Sn writes"),
    ],
)
def test_ipvsadm_what_loads_a_module_or_resolves_a_name_is_refused(line, said):
    from lab.replay.review import review_ipvs

    review_ipvs(
        "-A -t 10.96.0.1:80 -s rr\n-a -t [fd00::1]:80 -r [fd00::2]:8080 -m -w 1\n-A -t 10.96.0.2:80 -s sh -p 10800\n"
    )
    with pytest.raises(DumpError, match=said):
        review_ipvs(line)


@pytest.mark.parametrize(
    ("rule", "said"),
    [
        ("-A PREROUTING -p tcp -j CT --helper ftp", "--helper makes the kernel load a conntrack helper"),
        ("-A PREROUTING -p udp -j CT --timeout slow", "--timeout makes the kernel look up"),
        ("-A KUBE-SERVICES -s localhost -j ACCEPT", "'localhost' is no address: iptables-save writes numbers"),
    ],
)
def test_iptables_what_loads_a_helper_or_resolves_a_name_is_refused(rule, said):
    from lab.replay.families import check_addresses, xtables_dumps
    from lab.replay.review import review_iptables

    dump = f"*raw\n:PREROUTING ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\n{rule}\nCOMMIT\n"
    with pytest.raises(DumpError, match=said):
        review_iptables(dump)
        for part in xtables_dumps(dump, None).values():
            check_addresses(part)


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ('add ct helper ip t ftp-std { type "ftp" protocol tcp ; }', "`ct helper` makes the kernel load"),
        ('add rule ip t c ct helper set "ftp-std"', "`ct helper` makes the kernel load"),
        ("add ct timeout ip t slow { protocol udp ; policy = { unreplied : 1 } ; }", "`ct timeout`"),
        ("add rule ip t c log level audit", "`log level audit` writes to this machine's audit log"),
    ],
)
def test_nft_what_loads_a_helper_or_writes_the_audit_log_is_refused(line, said):
    from lab.replay.review import review_nft

    review_nft("add table ip t\nadd set ip t s { type ipv4_addr ; flags dynamic,timeout ; timeout 10800s ; }\n")
    with pytest.raises(DumpError, match=said):
        review_nft(line)


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda p: os.mkfifo(p), "a FIFO (named pipe), not a regular file: give a file"),
        (lambda p: p.symlink_to("/dev/zero"), "is a symbolic link: lab does not follow links on input; give the file"),
        (lambda p: p.mkdir(), "a directory, not a regular file: give a file"),
    ],
    ids=["fifo", "dev-zero", "directory"],
)
def test_a_dump_that_is_no_regular_file_is_refused_unread(tmp_path, make, said):
    path = tmp_path / "dump"
    make(path)
    with pytest.raises(InstallError) as caught, time_limit(5):  # read unbounded, a FIFO blocks and /dev/zero grows
        replay_from_args(parser().parse_args(["replay", "--rules", str(path), *PROBE]))
    assert str(caught.value).startswith(f"--rules {path}: {said}")


def test_a_dump_larger_than_the_bound_is_refused_unread(tmp_path, monkeypatch):
    monkeypatch.setattr(readfile, "MAX_BYTES", 1024)
    message = refused(tmp_path, "--nft", NFT + "#" * 1024)
    assert message == f"--nft {tmp_path / 'nft'}: more than 1024 bytes, the most lab reads from one file of this kind"
