/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-dashboard"

#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <glib-unix.h>

#include "dcp-dashboard.h"
#include "dcp-log.h"

#define REDRAW_MS  500
#define LOG_LINES  8

struct _DcpDashboard {
  DcpEngineState *state;
  guint           redraw_id;
  guint           input_id;
  guint           log_listener;
  gboolean        quiet_stderr;
  char           *log[LOG_LINES + 1];  /* oldest first, NULL-terminated */
};

/* The terminal's mode before we changed it; restored by the dashboard and at exit, so that a
 * failure on the way out does not leave the shell without echo. */
static struct termios saved_termios;
static gboolean termios_saved;
static gboolean screen_taken;
static gboolean atexit_added;

static void
restore_terminal (void)
{
  if (termios_saved)
    {
      tcsetattr (STDIN_FILENO, TCSANOW, &saved_termios);
      termios_saved = FALSE;
    }
  if (screen_taken)
    {
      /* Show the cursor, leave the alternate screen. */
      fputs ("\033[?25h\033[?1049l", stdout);
      fflush (stdout);
      screen_taken = FALSE;
    }
}

static void
take_terminal (void)
{
  if (!atexit_added)
    {
      atexit (restore_terminal);
      atexit_added = TRUE;
    }
  if (isatty (STDIN_FILENO) && tcgetattr (STDIN_FILENO, &saved_termios) == 0)
    {
      struct termios raw = saved_termios;

      /* Keys without Enter and without echo; ISIG stays, so Ctrl+C is SIGINT, which stops. */
      raw.c_lflag &= ~(ICANON | ECHO);
      raw.c_cc[VMIN] = 1;
      raw.c_cc[VTIME] = 0;
      termios_saved = tcsetattr (STDIN_FILENO, TCSANOW, &raw) == 0;
    }
  fputs ("\033[?1049h\033[?25l\033[2J", stdout);
  fflush (stdout);
  screen_taken = TRUE;
}

static void
add_line (GString *out, guint width, const char *format, ...) G_GNUC_PRINTF (3, 4);

/* One line, cut to the terminal's width. */
static void
add_line (GString *out, guint width, const char *format, ...)
{
  g_autofree char *line = NULL;
  va_list args;

  va_start (args, format);
  line = g_strdup_vprintf (format, args);
  va_end (args);
  if (!g_utf8_validate (line, -1, NULL))
    g_strlcpy (line, "(invalid text)", strlen (line) + 1);
  if (width > 0 && g_utf8_strlen (line, -1) > (glong) width)
    *g_utf8_offset_to_pointer (line, width) = '\0';
  g_string_append (out, line);
  g_string_append_c (out, '\n');
}

static void
add_progress (GString *line, gint64 done, gint64 total)
{
  const int cells = 20;
  int filled = total > 0 ? (int) (CLAMP (done, 0, total) * cells / total) : 0;

  g_string_append_c (line, '[');
  for (int i = 0; i < cells; i++)
    g_string_append_c (line, i < filled ? '#' : ' ');
  g_string_append_printf (line, "] %3d%% (%" G_GINT64_FORMAT "/%" G_GINT64_FORMAT ")",
                          total > 0 ? (int) (CLAMP (done, 0, total) * 100 / total) : 0, done, total);
}

char *
dcp_dashboard_render (DcpEngineState *state, const char *const *log_lines, guint width)
{
  g_autoptr(GString) out = g_string_new (NULL);
  g_autoptr(GArray) conversations = NULL;
  g_autofree char *address = NULL, *model = NULL, *status = NULL;
  g_autofree char *vram = NULL, *ram = NULL, *disk = NULL;
  guint64 context_size, pool_tokens, vram_bytes, ram_bytes, disk_bytes;
  guint max_conversations, active, queue_length;
  double tps, prompt_tps;

  g_return_val_if_fail (DCP_IS_ENGINE_STATE (state), NULL);

  g_object_get (state, "address", &address, "model", &model, "state", &status,
                "context-size", &context_size, "pool-tokens", &pool_tokens,
                "max-conversations", &max_conversations, "active-conversations", &active,
                "queue-length", &queue_length, "vram-bytes", &vram_bytes, "ram-bytes", &ram_bytes,
                "disk-bytes", &disk_bytes, "tokens-per-second", &tps, "prompt-tokens-per-second", &prompt_tps,
                NULL);
  vram = g_format_size (vram_bytes);
  ram = g_format_size (ram_bytes);
  disk = g_format_size (disk_bytes);
  conversations = dcp_engine_state_list_conversations (state);

  add_line (out, width, "Decapybara %s   %s", PACKAGE_VERSION, *address ? address : "(not listening yet)");
  add_line (out, width, "Model    %s   context %" G_GUINT64_FORMAT " tokens, pool %" G_GUINT64_FORMAT " tokens",
            *model ? model : "(none)", context_size, pool_tokens);
  add_line (out, width, "State    %s", status);
  add_line (out, width, "Speed    %.1f tokens/s   prompt %.1f tokens/s", tps, prompt_tps);
  add_line (out, width, "Memory   VRAM %s   RAM %s   disk %s", vram, ram, disk);
  add_line (out, width, "Queue    %u waiting   %u of %u conversations active", queue_length, active,
            max_conversations);
  add_line (out, width, "%s", "");
  add_line (out, width, "  CONV     CONTEXT  TIER  STATE    PROMPT");
  if (conversations->len == 0)
    add_line (out, width, "  (none)");
  for (guint i = 0; i < conversations->len; i++)
    {
      const DcpConversation *c = &g_array_index (conversations, DcpConversation, i);
      g_autoptr(GString) line = g_string_new (NULL);

      g_string_printf (line, "  %-6u %9" G_GUINT64_FORMAT "  %-4s  %-7s  ", c->id, c->context_tokens,
                       dcp_tier_to_string (c->tier), dcp_conversation_state_to_string (c->state));
      if (c->state == DCP_CONVERSATION_READING && c->prompt_total > 0)
        add_progress (line, c->prompt_done, c->prompt_total);
      add_line (out, width, "%s", line->str);
    }
  add_line (out, width, "%s", "");
  add_line (out, width, "Log");
  for (guint i = 0; log_lines != NULL && log_lines[i] != NULL; i++)
    add_line (out, width, "  %s", log_lines[i]);
  add_line (out, width, "%s", "");
  add_line (out, width, "q or Ctrl+C stops the engine");
  return g_string_free (g_steal_pointer (&out), FALSE);
}

static gboolean
redraw (gpointer data)
{
  DcpDashboard *self = data;
  g_autofree char *text = NULL;
  g_auto(GStrv) lines = NULL;
  g_autoptr(GString) frame = g_string_new ("\033[H");
  struct winsize size = { 0 };
  guint width = 80, height = 24;

  if (ioctl (STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0)
    {
      width = size.ws_col;
      height = size.ws_row;
    }
  text = dcp_dashboard_render (self->state, (const char *const *) self->log, width);
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL && i < height; i++)
    {
      if (lines[i][0] == '\0' && lines[i + 1] == NULL)
        break;
      g_string_append_printf (frame, "%s\033[K\r\n", lines[i]);
    }
  g_string_append (frame, "\033[J");
  fwrite (frame->str, 1, frame->len, stdout);
  fflush (stdout);
  return G_SOURCE_CONTINUE;
}

static gboolean
on_input (int fd, GIOCondition condition, gpointer data)
{
  DcpDashboard *self = data;
  char keys[64];
  gssize n = read (fd, keys, sizeof keys);

  if (n <= 0)
    {
      /* The terminal went away: keep serving, stop reading. */
      self->input_id = 0;
      return G_SOURCE_REMOVE;
    }
  for (gssize i = 0; i < n; i++)
    if (keys[i] == 'q' || keys[i] == 'Q' || keys[i] == 3)
      dcp_engine_state_stop (self->state);
  return G_SOURCE_CONTINUE;
}

static void
on_log (GLogLevelFlags level, const char *domain, const char *message, gpointer data)
{
  DcpDashboard *self = data;
  g_autoptr(GDateTime) now = g_date_time_new_now_local ();
  char *line = dcp_log_format_line (level, domain, message, now);

  /* Only the first line of a record. */
  line[strcspn (line, "\r\n")] = '\0';
  if (self->log[LOG_LINES - 1] != NULL)
    {
      g_free (self->log[0]);
      memmove (self->log, self->log + 1, (LOG_LINES - 1) * sizeof (char *));
      self->log[LOG_LINES - 1] = NULL;
    }
  for (guint i = 0; i < LOG_LINES; i++)
    if (self->log[i] == NULL)
      {
        self->log[i] = line;
        break;
      }
}

DcpDashboard *
dcp_dashboard_new (DcpEngineState *state, gboolean force_log_lines)
{
  DcpDashboard *self;

  g_return_val_if_fail (DCP_IS_ENGINE_STATE (state), NULL);

  if (force_log_lines || !isatty (STDOUT_FILENO))
    return NULL;
  self = g_new0 (DcpDashboard, 1);
  self->state = g_object_ref (state);
  take_terminal ();
  self->log_listener = dcp_log_add_listener (on_log, self);
  self->quiet_stderr = isatty (STDERR_FILENO);
  if (self->quiet_stderr)
    dcp_log_set_stderr (FALSE);
  if (termios_saved)
    self->input_id = g_unix_fd_add (STDIN_FILENO, G_IO_IN | G_IO_HUP | G_IO_ERR, on_input, self);
  self->redraw_id = g_timeout_add (REDRAW_MS, redraw, self);
  redraw (self);
  return self;
}

void
dcp_dashboard_free (DcpDashboard *self)
{
  if (self == NULL)
    return;
  g_clear_handle_id (&self->redraw_id, g_source_remove);
  g_clear_handle_id (&self->input_id, g_source_remove);
  dcp_log_remove_listener (self->log_listener);
  restore_terminal ();
  if (self->quiet_stderr)
    dcp_log_set_stderr (TRUE);
  for (guint i = 0; i < LOG_LINES; i++)
    g_free (self->log[i]);
  g_object_unref (self->state);
  g_free (self);
}
