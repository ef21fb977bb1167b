# nddmilter: a message moved (or copied, or uploaded) into Junk is a junk
# report by the IMAP user who moved it. Run by Dovecot's imap_sieve
# plugin (90-nddmilter.conf); the pipe program is nddmilter-report in
# sieve_pipe_bin_dir. :copy keeps the message where the user put it.
require ["vnd.dovecot.pipe", "copy", "imapsieve", "environment", "variables"];

if environment :matches "imap.user" "*" {
  set "user" "${1}";
}
if string :is "${user}" "" {
  stop;
}
pipe :copy "nddmilter-report" ["spam", "${user}"];
