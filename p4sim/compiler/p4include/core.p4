/* core.p4 for p4sim: the P4-16 core library (spec appendix "core library").
 * Written for p4sim; declares the same names and signatures as p4c's core.p4 so
 * that programs written for p4c compile unchanged. */

#ifndef _CORE_P4_
#define _CORE_P4_

/* Errors the parser may signal; programs add their own with more error {...}. */
error {
    NoError,
    PacketTooShort,
    NoMatch,
    StackOutOfBounds,
    HeaderTooShort,
    ParserTimeout,
    ParserInvalidArgument
}

/* The packet as the parser sees it. */
extern packet_in {
    /* Read a fixed-size header and advance past it. */
    void extract<T>(out T hdr);
    /* Read a header with one varbit field holding variableFieldSizeInBits bits. */
    void extract<T>(out T variableSizeHeader, in bit<32> variableFieldSizeInBits);
    /* Peek at the next bits without consuming them. */
    T lookahead<T>();
    /* Skip bits. */
    void advance(in bit<32> sizeInBits);
    /* Length of the whole packet in bytes. */
    bit<32> length();
}

/* The packet as the deparser builds it. */
extern packet_out {
    /* Append a header (only if valid) or the valid headers of a struct/stack. */
    void emit<T>(in T hdr);
}

/* In a parser: if check is false, stop parsing with error toSignal. */
extern void verify(in bool check, in error toSignal);

/* The action that does nothing; the default of tables that name no default. */
@noWarn("unused")
action NoAction() {}

/* Match kinds every architecture offers. */
match_kind {
    exact,
    ternary,
    lpm
}

#endif /* _CORE_P4_ */
