/* Pre-tokenizers of byte-level BPE: each tokenizer.ggml.pre names a list of regular
 * expressions applied one after another, each splitting the pieces the previous one left
 * (text between matches stays a piece of its own). No regex engine: every fixed pattern
 * is a hand-written matcher over code points.
 *
 * Two matching worlds, as in the reference implementation:
 *  - the GPT-2 and Llama-3 patterns have dedicated scanners over Unicode flags;
 *  - every other pattern runs, in the reference, through std::regex on a "collapsed" text
 *    where each code point >= 128 becomes one byte naming its class (letter, number,
 *    punctuation, mark, symbol, other; White_Space becomes \v) and ASCII stays itself, or,
 *    for patterns without \p{..}, on the code points with non-ASCII White_Space replaced
 *    by \v. The matchers below see the same values (struct ctx.xc / .xw), so \s, \p{L} and
 *    friends mean exactly what they meant there (e.g. \s is ASCII \t\n\v\f\r and space). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tok/tok_impl.h"
#include "tok/unicode.h"

/* collapsed class bytes */
enum { XC_OTHER = 0xD0, XC_N = 0xD1, XC_L = 0xD2, XC_P = 0xD3, XC_M = 0xD4, XC_S = 0xD5 };

struct ctx {
    uint32_t *cp;      /* [n] code points (invalid UTF-8 bytes are U+FFFD) */
    uint16_t *fl;      /* [n] uni_flags */
    uint32_t *xc;      /* [n] collapsed values */
    uint32_t *xw;      /* [n] code points, non-ASCII White_Space -> \v */
    size_t n;
};

/* segment lengths, in code points */
struct segs {
    size_t *v;
    size_t n, cap;
};

static bool seg_push(struct segs *s, size_t len)
{
    if (!len)
        return true;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        size_t *v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return false;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = len;
    return true;
}

/* ---- classes as std::regex saw them ---- */

static inline bool c_s(uint32_t x) { return x == ' ' || (x >= '\t' && x <= '\r'); }
static inline bool c_alpha(uint32_t x) { return (x >= 'a' && x <= 'z') || (x >= 'A' && x <= 'Z'); }
static inline bool c_digit(uint32_t x) { return x >= '0' && x <= '9'; }
static inline bool x_l(uint32_t x) { return x == XC_L || c_alpha(x); }
static inline bool x_n(uint32_t x) { return x == XC_N || c_digit(x); }
static inline bool x_m(uint32_t x) { return x == XC_M; }
/* bit sets over ASCII: 1 << (c & 63) in word c >> 6 */
struct ascii_set {
    uint64_t w[2];
};
static bool in_set(const struct ascii_set *s, uint32_t x)
{
    return x < 128 && ((s->w[x >> 6] >> (x & 63)) & 1);
}
static struct ascii_set make_set(const char *chars)
{
    struct ascii_set s = {{0, 0}};
    for (; *chars; chars++)
        s.w[(unsigned char)*chars >> 6] |= 1ull << ((unsigned char)*chars & 63);
    return s;
}
/* ASCII punctuation as the reference's collapsed \p{P} lists it, and the extra characters of
 * the default and Falcon punctuation patterns */
static struct ascii_set set_p, set_dflt, set_falcon;
static void init_sets(void)
{
    set_p = make_set("!\"#%&'()*,-./:;?@[\\]_{}");
    set_dflt = make_set("!\"#%&'()*,-./:;?@[\\]_{}$+<=>^~|");
    set_falcon = make_set("!\"#%&'()*,-./:;?@[\\]_{}$+<=>^~|`");
}
static inline bool x_p(uint32_t x) { return x == XC_P || in_set(&set_p, x); }
static inline bool x_rn(uint32_t x) { return x == '\r' || x == '\n'; }

/* ---- matchers: length of the match at p (0: none); [p, e) is the piece being searched ---- */
typedef size_t (*matcher)(const uint32_t *x, size_t p, size_t e);

static size_t run(const uint32_t *x, size_t p, size_t e, bool (*cls)(uint32_t))
{
    size_t q = p;
    while (q < e && cls(x[q]))
        q++;
    return q - p;
}

/* (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]) */
static size_t m_contraction(const uint32_t *x, size_t p, size_t e)
{
    if (x[p] != '\'' || p + 1 >= e || !c_alpha(x[p + 1]))
        return 0;
    uint32_t a = x[p + 1] | 0x20;
    if (a == 's' || a == 't' || a == 'm' || a == 'd')
        return 2;
    if (p + 2 < e && c_alpha(x[p + 2])) {
        uint32_t b = x[p + 2] | 0x20;
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
            return 3;
    }
    return 0;
}

static bool not_rn_l_n(uint32_t x) { return !x_rn(x) && !x_l(x) && !x_n(x); }
static bool l_or_m(uint32_t x) { return x_l(x) || x_m(x); }

/* [^\r\n\p{L}\p{N}]?\p{L}+ */
static size_t m_opt_letters(const uint32_t *x, size_t p, size_t e)
{
    if (not_rn_l_n(x[p]) && p + 1 < e && x_l(x[p + 1]))
        return 1 + run(x, p + 1, e, x_l);
    return run(x, p, e, x_l);
}

/* [^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+ */
static size_t m_opt_letters_marks(const uint32_t *x, size_t p, size_t e)
{
    if (not_rn_l_n(x[p]) && p + 1 < e && l_or_m(x[p + 1]))
        return 1 + run(x, p + 1, e, l_or_m);
    return run(x, p, e, l_or_m);
}

static size_t m_num1(const uint32_t *x, size_t p, size_t e) { (void)e; return x_n(x[p]); }
static size_t m_nums(const uint32_t *x, size_t p, size_t e) { return run(x, p, e, x_n); }

static bool other_lnm(uint32_t x) { return !c_s(x) && !x_l(x) && !x_n(x); }
static bool other_lmn(uint32_t x) { return !c_s(x) && !x_l(x) && !x_m(x) && !x_n(x); }

static size_t opt_space_run_rn(const uint32_t *x, size_t p, size_t e, bool (*cls)(uint32_t))
{
    size_t q = p;
    if (x[q] == ' ' && q + 1 < e && cls(x[q + 1]))
        q++;
    if (!cls(x[q]))
        return 0;
    q += run(x, q, e, cls);
    while (q < e && x_rn(x[q]))
        q++;
    return q - p;
}

/*  ?[^\s\p{L}\p{N}]+[\r\n]* */
static size_t m_punct_rn(const uint32_t *x, size_t p, size_t e) { return opt_space_run_rn(x, p, e, other_lnm); }
/*  ?[^\s\p{L}\p{M}\p{N}]+[\r\n]* */
static size_t m_punct_m_rn(const uint32_t *x, size_t p, size_t e) { return opt_space_run_rn(x, p, e, other_lmn); }

/* \s*[\r\n]+ : greedy \s* gives back until a line break follows */
static size_t m_space_newlines(const uint32_t *x, size_t p, size_t e)
{
    size_t q = p + run(x, p, e, c_s);
    while (q > p) {
        if (x_rn(x[q - 1]))
            return q - p;
        q--;
    }
    return 0;
}

/* \s+(?!\S) */
static size_t m_space_not_before_text(const uint32_t *x, size_t p, size_t e)
{
    size_t r = run(x, p, e, c_s);
    if (!r || p + r == e)
        return r;
    return r - 1;
}

/* \s+ */
static size_t m_spaces(const uint32_t *x, size_t p, size_t e) { return run(x, p, e, c_s); }

/* [\p{P}\$\+<=>\^~\|]+ and the same with a backtick */
static bool dflt_punct(uint32_t x) { return x == XC_P || in_set(&set_dflt, x); }
static bool falcon_punct(uint32_t x) { return x == XC_P || in_set(&set_falcon, x); }
static size_t m_dflt_punct(const uint32_t *x, size_t p, size_t e) { return run(x, p, e, dflt_punct); }
static size_t m_falcon_punct(const uint32_t *x, size_t p, size_t e) { return run(x, p, e, falcon_punct); }

/* [0-9][0-9][0-9] */
static size_t m_digit3(const uint32_t *x, size_t p, size_t e)
{
    return (p + 3 <= e && c_digit(x[p]) && c_digit(x[p + 1]) && c_digit(x[p + 2])) ? 3 : 0;
}

/* [\r\n] */
static size_t m_one_rn(const uint32_t *x, size_t p, size_t e) { (void)e; return x_rn(x[p]); }

/* \s?X+ for a class X disjoint from \s */
static size_t opt_space_run(const uint32_t *x, size_t p, size_t e, bool (*cls)(uint32_t))
{
    if (c_s(x[p]) && p + 1 < e && cls(x[p + 1]))
        return 1 + run(x, p + 1, e, cls);
    return run(x, p, e, cls);
}
static size_t m_space_letters(const uint32_t *x, size_t p, size_t e) { return opt_space_run(x, p, e, x_l); }
static size_t m_space_punct(const uint32_t *x, size_t p, size_t e) { return opt_space_run(x, p, e, x_p); }

/* [一-龥ࠀ-一가-퟿]+ */
static bool cjk_hangul(uint32_t x)
{
    return (x >= 0x4E00 && x <= 0x9FA5) || (x >= 0x0800 && x <= 0x4E00) || (x >= 0xAC00 && x <= 0xD7FF);
}
static size_t m_cjk(const uint32_t *x, size_t p, size_t e) { return run(x, p, e, cjk_hangul); }

/* DeepSeek LLM's cased-letter class (ranges of the reference pattern) */
static const uint32_t dsl_letters[][2] = {
    {0x00041, 0x0005A}, {0x00061, 0x0007A}, {0x000B5, 0x000B5}, {0x000C0, 0x000D6}, {0x000D8, 0x000F6}, {0x000F8, 0x001BA},
    {0x001BC, 0x001BF}, {0x001C4, 0x00293}, {0x00295, 0x002AF}, {0x00370, 0x00373}, {0x00376, 0x00376}, {0x00377, 0x00377},
    {0x0037B, 0x0037D}, {0x0037F, 0x0037F}, {0x00386, 0x00386}, {0x00388, 0x0038A}, {0x0038C, 0x0038C}, {0x0038E, 0x003A1},
    {0x003A3, 0x003F5}, {0x003F7, 0x00481}, {0x0048A, 0x0052F}, {0x00531, 0x00556}, {0x010A0, 0x010C5}, {0x013A0, 0x013F5},
    {0x013F8, 0x013FD}, {0x01C90, 0x01CBA}, {0x01CBD, 0x01CBF}, {0x01D00, 0x01D2B}, {0x01D6B, 0x01D77}, {0x01D79, 0x01D9A},
    {0x01E00, 0x01F15}, {0x01F18, 0x01F1D}, {0x01F20, 0x01F45}, {0x01F48, 0x01F4D}, {0x01F50, 0x01F57}, {0x01F59, 0x01F59},
    {0x01F5B, 0x01F5B}, {0x01F5D, 0x01F5D}, {0x01F5F, 0x01F7D}, {0x01F80, 0x01FB4}, {0x01FB6, 0x01FBC}, {0x01FBE, 0x01FBE},
    {0x01FC2, 0x01FC4}, {0x01FC6, 0x01FCC}, {0x01FD0, 0x01FD3}, {0x01FD6, 0x01FDB}, {0x01FE0, 0x01FEC}, {0x01FF2, 0x01FF4},
    {0x01FF6, 0x01FFC}, {0x02102, 0x02102}, {0x02107, 0x02107}, {0x0210A, 0x02113}, {0x02115, 0x02115}, {0x02119, 0x0211D},
    {0x02124, 0x02124}, {0x02126, 0x02126}, {0x02128, 0x02128}, {0x0212A, 0x0212D}, {0x0212F, 0x02134}, {0x02139, 0x02139},
    {0x0213C, 0x0213F}, {0x02145, 0x02149}, {0x0214E, 0x0214E}, {0x02183, 0x02183}, {0x02184, 0x02184}, {0x02C00, 0x02C7B},
    {0x02C7E, 0x02CE4}, {0x02CEB, 0x02CEE}, {0x02CF2, 0x02CF2}, {0x02CF3, 0x02CF3}, {0x0A640, 0x0A66D}, {0x0A680, 0x0A69B},
    {0x0A722, 0x0A76F}, {0x0A771, 0x0A787}, {0x0A78B, 0x0A78E}, {0x0AB70, 0x0ABBF}, {0x0FB00, 0x0FB06}, {0x0FB13, 0x0FB17},
    {0x0FF21, 0x0FF3A}, {0x0FF41, 0x0FF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB}, {0x10C80, 0x10CB2},
    {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};
static bool dsl_letter(uint32_t x)
{
    size_t lo = 0, hi = sizeof dsl_letters / sizeof dsl_letters[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (dsl_letters[mid][1] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < sizeof dsl_letters / sizeof dsl_letters[0] && dsl_letters[lo][0] <= x;
}
static size_t m_dsl_letters(const uint32_t *x, size_t p, size_t e) { return opt_space_run(x, p, e, dsl_letter); }

/* [!-/:-~！-／：-～‘-‟　-。] */
static bool dsl_punct(uint32_t x)
{
    return (x >= 0x21 && x <= 0x2F) || (x >= 0x3A && x <= 0x7E) || (x >= 0xFF01 && x <= 0xFF0F) ||
           (x >= 0xFF1A && x <= 0xFF5E) || (x >= 0x2018 && x <= 0x201F) || (x >= 0x3000 && x <= 0x3002);
}
static size_t m_dsl_punct(const uint32_t *x, size_t p, size_t e) { return opt_space_run(x, p, e, dsl_punct); }

/* \s+$ */
static size_t m_trailing_space(const uint32_t *x, size_t p, size_t e)
{
    size_t r = run(x, p, e, c_s);
    return p + r == e ? r : 0;
}

/* ---- stages ---- */

enum stage_kind { ST_GPT2, ST_LLAMA3, ST_COLLAPSED, ST_WIDE };
#define MAX_ALTS 7
struct stage {
    enum stage_kind kind;
    matcher alt[MAX_ALTS]; /* tried in order: the first alternative that matches wins */
};

static const struct stage st_gpt2 = {ST_GPT2, {0}};
static const struct stage st_llama3 = {ST_LLAMA3, {0}};
static const struct stage st_num1 = {ST_COLLAPSED, {m_num1}};
static const struct stage st_nums = {ST_COLLAPSED, {m_nums}};
static const struct stage st_digit3 = {ST_WIDE, {m_digit3}};
static const struct stage st_one_rn = {ST_WIDE, {m_one_rn}};
static const struct stage st_cjk = {ST_WIDE, {m_cjk}};
static const struct stage st_qwen2 = {ST_COLLAPSED, {m_contraction, m_opt_letters, m_num1, m_punct_rn,
                                                     m_space_newlines, m_space_not_before_text, m_spaces}};
static const struct stage st_qwen35 = {ST_COLLAPSED, {m_contraction, m_opt_letters_marks, m_num1, m_punct_m_rn,
                                                      m_space_newlines, m_space_not_before_text, m_spaces}};
static const struct stage st_dflt_punct = {ST_COLLAPSED, {m_dflt_punct}};
static const struct stage st_falcon_punct = {ST_COLLAPSED, {m_falcon_punct}};
static const struct stage st_space_letters = {ST_COLLAPSED, {m_space_letters}};
static const struct stage st_space_punct = {ST_COLLAPSED, {m_space_punct}};
static const struct stage st_dsl_letters = {ST_WIDE, {m_dsl_letters}};
static const struct stage st_dsl_punct = {ST_WIDE, {m_dsl_punct}};
static const struct stage st_trailing_space = {ST_WIDE, {m_trailing_space}};

static const struct stage *const stages_default[] = {&st_dflt_punct, &st_gpt2, &st_nums, &st_digit3, NULL};
static const struct stage *const stages_gpt2[] = {&st_gpt2, NULL};
static const struct stage *const stages_llama3[] = {&st_llama3, NULL};
static const struct stage *const stages_qwen2[] = {&st_qwen2, NULL};
static const struct stage *const stages_qwen35[] = {&st_qwen35, NULL};
static const struct stage *const stages_starcoder[] = {&st_num1, &st_gpt2, NULL};
static const struct stage *const stages_falcon[] = {&st_falcon_punct, &st_gpt2, &st_digit3, NULL};
static const struct stage *const stages_dsl[] = {&st_one_rn, &st_dsl_letters, &st_dsl_punct, &st_trailing_space,
                                                 &st_cjk, &st_nums, NULL};
static const struct stage *const stages_dsc[] = {&st_one_rn, &st_space_letters, &st_space_punct, &st_cjk,
                                                 &st_num1, NULL};

static const struct stage *const *stages_for(enum pretok_id id)
{
    switch (id) {
    case PRE_GPT2: return stages_gpt2;
    case PRE_LLAMA3: return stages_llama3;
    case PRE_QWEN2: return stages_qwen2;
    case PRE_QWEN35: return stages_qwen35;
    case PRE_STARCODER: return stages_starcoder;
    case PRE_FALCON: return stages_falcon;
    case PRE_DEEPSEEK_LLM: return stages_dsl;
    case PRE_DEEPSEEK_CODER: return stages_dsc;
    case PRE_DEFAULT: break;
    }
    return stages_default;
}

/* regex search over one piece: matches and the gaps between them become pieces */
static bool split_search(const struct stage *st, const uint32_t *x, size_t s, size_t e, struct segs *out)
{
    size_t p = s, last = s;
    while (p < e) {
        size_t m = 0;
        for (int a = 0; a < MAX_ALTS && st->alt[a] && !m; a++)
            m = st->alt[a](x, p, e);
        if (!m) {
            p++;
            continue;
        }
        if (!seg_push(out, p - last) || !seg_push(out, m))
            return false;
        p += m;
        last = p;
    }
    return seg_push(out, e - last);
}

#define OOR 0xFFFFFFFFu

/* GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static bool split_gpt2(const struct ctx *c, size_t ini, size_t end, struct segs *out)
{
#define CP(i) ((i) < end ? c->cp[i] : OOR)
#define FL(i) ((i) < end ? c->fl[i] : 0u)
    size_t prev = ini;
    for (size_t pos = ini; pos < end;) {
        uint32_t cpt = CP(pos);
        unsigned f = FL(pos);
        size_t to = 0;
        if (cpt == '\'' && pos + 1 < end) {
            uint32_t nx = CP(pos + 1);
            if (nx == 's' || nx == 't' || nx == 'm' || nx == 'd')
                to = pos + 2;
            else if (pos + 2 < end) {
                uint32_t nn = CP(pos + 2);
                if ((nx == 'r' && nn == 'e') || (nx == 'v' && nn == 'e') || (nx == 'l' && nn == 'l'))
                    to = pos + 3;
            }
        }
        if (!to) {
            unsigned f2 = cpt == ' ' ? FL(pos + 1) : f;
            if (f2 & UF_L) {
                to = pos + (cpt == ' ');
                while (FL(to) & UF_L)
                    to++;
            } else if (f2 & UF_N) {
                to = pos + (cpt == ' ');
                while (FL(to) & UF_N)
                    to++;
            } else if (!(f2 & (UF_WS | UF_L | UF_N)) && f2) {
                to = pos + (cpt == ' ');
                while (!(FL(to) & (UF_WS | UF_L | UF_N)) && FL(to))
                    to++;
            } else {
                size_t k = 0;
                while (FL(pos + k) & UF_WS)
                    k++;
                if (k > 1 && CP(pos + k) != OOR)
                    to = pos + k - 1;
                else if (k > 0)
                    to = pos + k;
                else
                    to = pos + 1;
            }
        }
        if (!seg_push(out, to - prev))
            return false;
        prev = pos = to;
    }
    return true;
}

/* Llama 3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
 *          \s*[\r\n]+|\s+(?!\S)|\s+ */
static bool split_llama3(const struct ctx *c, size_t ini, size_t end, struct segs *out)
{
    size_t prev = ini;
#define PUSH(to_)                              \
    do {                                       \
        if (!seg_push(out, (to_) - prev))      \
            return false;                      \
        prev = (to_);                          \
    } while (0)
    for (size_t pos = ini; pos < end;) {
        uint32_t cpt = CP(pos);
        unsigned f = FL(pos);
        if (cpt == '\'' && pos + 1 < end) {
            uint32_t nx = uni_tolower(CP(pos + 1));
            if (nx == 's' || nx == 't' || nx == 'm' || nx == 'd') {
                pos += 2;
                PUSH(pos);
                continue;
            }
            if (pos + 2 < end) {
                uint32_t nn = uni_tolower(CP(pos + 2));
                if ((nx == 'r' && nn == 'e') || (nx == 'v' && nn == 'e') || (nx == 'l' && nn == 'l')) {
                    pos += 3;
                    PUSH(pos);
                    continue;
                }
            }
        }
        if (!(cpt == '\r' || cpt == '\n' || (f & UF_N)) && ((f & UF_L) || (FL(pos + 1) & UF_L))) {
            pos++;
            while (FL(pos) & UF_L)
                pos++;
            PUSH(pos);
            continue;
        }
        if (f & UF_N) {
            size_t n0 = pos;
            while (FL(pos) & UF_N) {
                if (++pos - n0 >= 3) {
                    PUSH(pos);
                    n0 = pos;
                }
            }
            PUSH(pos);
            continue;
        }
        unsigned f2 = cpt == ' ' ? FL(pos + 1) : f;
        if (!(f2 & (UF_WS | UF_L | UF_N)) && f) { /* the reference tests this code point's flags here */
            pos += (cpt == ' ');
            while (!(f2 & (UF_WS | UF_L | UF_N)) && f2) {
                pos++;
                f2 = FL(pos);
            }
            while (CP(pos) == '\r' || CP(pos) == '\n')
                pos++;
            PUSH(pos);
            continue;
        }
        size_t k = 0, last_rn = 0;
        while (FL(pos + k) & UF_WS) {
            uint32_t c2 = CP(pos + k);
            if (c2 == '\r' || c2 == '\n')
                last_rn = pos + k + 1;
            k++;
        }
        if (last_rn > 0)
            pos = last_rn;
        else if (k > 1 && CP(pos + k) != OOR)
            pos += k - 1;
        else if (k > 0)
            pos += k;
        else
            pos++;
        PUSH(pos);
    }
    return true;
#undef PUSH
#undef CP
#undef FL
}

static bool apply_stage(const struct stage *st, const struct ctx *c, const struct segs *in, struct segs *out)
{
    out->n = 0;
    size_t s = 0;
    for (size_t i = 0; i < in->n; i++) {
        size_t e = s + in->v[i];
        bool ok;
        if (st->kind == ST_GPT2)
            ok = split_gpt2(c, s, e, out);
        else if (st->kind == ST_LLAMA3)
            ok = split_llama3(c, s, e, out);
        else
            ok = split_search(st, st->kind == ST_COLLAPSED ? c->xc : c->xw, s, e, out);
        if (!ok)
            return false;
        s = e;
    }
    return true;
}

static uint32_t collapse(uint32_t cp, unsigned f)
{
    if (cp < 128)
        return cp;
    if (f & UF_WS)
        return '\v';
    if (f & UF_N)
        return XC_N;
    if (f & UF_L)
        return XC_L;
    if (f & UF_P)
        return XC_P;
    if (f & UF_M)
        return XC_M;
    if (f & UF_S)
        return XC_S;
    return XC_OTHER;
}

void pretok_out_free(struct pretok_out *o)
{
    free(o->buf);
    free(o->ends);
    memset(o, 0, sizeof *o);
}

static bool out_word(const struct tokenizer *t, const struct ctx *c, size_t s, size_t e, struct pretok_out *o)
{
    size_t need = (e - s) * 8;
    if (o->len + need > o->cap) {
        size_t cap = (o->len + need) * 2;
        char *b = realloc(o->buf, cap);
        if (!b)
            return false;
        o->buf = b;
        o->cap = cap;
    }
    if (o->n == o->ends_cap) {
        size_t cap = o->ends_cap ? o->ends_cap * 2 : 256;
        size_t *v = realloc(o->ends, cap * sizeof *v);
        if (!v)
            return false;
        o->ends = v;
        o->ends_cap = cap;
    }
    for (size_t i = s; i < e; i++) {
        char u[4];
        size_t ul = uni_encode(c->cp[i], u);
        for (size_t k = 0; k < ul; k++) {
            unsigned char b = (unsigned char)u[k];
            memcpy(o->buf + o->len, t->byte_enc[b], t->byte_enc_len[b]);
            o->len += t->byte_enc_len[b];
        }
    }
    o->ends[o->n++] = o->len;
    return true;
}

brasa_status pretok_split(const struct tokenizer *t, const char *text, size_t len, struct pretok_out *o,
                          struct brasa_err *err)
{
    struct ctx c = {0};
    struct segs a = {0}, b = {0};
    bool ok = true;
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_sets);
    o->len = o->n = 0;
    if (!len)
        return BRASA_OK;
    /* the collapsed and wide views are built only when a stage of this pre-tokenizer reads them */
    bool need_c = false, need_w = false;
    for (const struct stage *const *st = stages_for(t->pre); *st; st++) {
        need_c |= (*st)->kind == ST_COLLAPSED;
        need_w |= (*st)->kind == ST_WIDE;
    }
    c.cp = malloc(len * sizeof *c.cp);
    c.fl = malloc(len * sizeof *c.fl);
    c.xc = need_c ? malloc(len * sizeof *c.xc) : NULL;
    c.xw = need_w ? malloc(len * sizeof *c.xw) : NULL;
    ok = c.cp && c.fl && (c.xc || !need_c) && (c.xw || !need_w);
    for (size_t pos = 0; ok && pos < len;) {
        uint32_t cp = uni_decode((const unsigned char *)text, len, &pos);
        unsigned f = uni_flags(cp);
        c.cp[c.n] = cp;
        c.fl[c.n] = (uint16_t)f;
        if (need_c)
            c.xc[c.n] = collapse(cp, f);
        if (need_w)
            c.xw[c.n] = (cp > 0x7F && (f & UF_WS)) ? '\v' : cp;
        c.n++;
    }
    ok = ok && seg_push(&a, c.n);
    for (const struct stage *const *st = stages_for(t->pre); ok && *st; st++) {
        ok = apply_stage(*st, &c, &a, &b);
        struct segs sw = a;
        a = b;
        b = sw;
    }
    size_t s = 0;
    for (size_t i = 0; ok && i < a.n; i++) {
        ok = out_word(t, &c, s, s + a.v[i], o);
        s += a.v[i];
    }
    free(c.cp);
    free(c.fl);
    free(c.xc);
    free(c.xw);
    free(a.v);
    free(b.v);
    return ok ? BRASA_OK : brasa_fail(err, BRASA_ENOMEM, "out of memory while pre-tokenizing");
}
