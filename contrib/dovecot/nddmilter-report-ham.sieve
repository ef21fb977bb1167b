# nddmilter: a message moved out of Junk, except into Trash, is a
# not-junk report by the IMAP user who moved it (it also withdraws the
# junk report that user made of it). Run by Dovecot's imap_sieve plugin
# (90-nddmilter.conf); the pipe program is nddmilter-report in
# sieve_pipe_bin_dir.
require ["vnd.dovecot.pipe", "copy", "imapsieve", "environment", "variables"];

if environment :matches "imap.mailbox" "*" {
  set "mailbox" "${1}";
}
# Deleting junk is not saying it is not junk.
if string :is "${mailbox}" ["Trash", "Deleted Items", "Deleted Messages", "Junk"] {
  stop;
}
if environment :matches "imap.user" "*" {
  set "user" "${1}";
}
if string :is "${user}" "" {
  stop;
}
pipe :copy "nddmilter-report" ["ham", "${user}"];
