/* SPDX-License-Identifier: MIT */
/*
 * The EROFS on-disk structures, as kiln reads and writes them.
 * Every field is little-endian; sizes are asserted beside each struct.
 */
#ifndef KILN_FORMAT_EROFS_FS_H
#define KILN_FORMAT_EROFS_FS_H

#include <stdint.h>

#define EROFS_SUPER_MAGIC	0xE0F5E1E2u
#define EROFS_SUPER_OFFSET	1024u		/* superblock byte offset */
#define EROFS_SB_BASE_SIZE	128u		/* superblock without ext slots */
#define EROFS_SB_EXTSLOT_SIZE	16u
#define EROFS_SB_CRC_SEED	0xFFFFFFFFu	/* CRC32C init, no final xor */
#define EROFS_ISLOT_BITS	5u		/* inodes live on 32-byte slots */
#define EROFS_ISLOT_SIZE	(1u << EROFS_ISLOT_BITS)
#define EROFS_MIN_BLKSZBITS	9u
#define EROFS_MAX_BLKSZBITS	12u		/* PAGE_SHIFT on x86-64 */
#define EROFS_NAME_LEN		255u
#define EROFS_SYMLINK_MAX	4095u
#define EROFS_NULL_ADDR32	0xFFFFFFFFu	/* hole / unused block address */
/* METABOX: le64 nid of the metabox inode, in the first extension slot */
#define EROFS_SB_METABOX_NID_OFF	0x80u
/* nid bit 63: the inode lives in the metabox inode's decoded data */
#define EROFS_NID_METABOX_BIT	63u
#define EROFS_NID_MASK		((1ull << EROFS_NID_METABOX_BIT) - 1)

/* feature_compat: unknown bits are ignored by readers */
#define EROFS_FEATURE_COMPAT_SB_CHKSUM		0x00000001u
#define EROFS_FEATURE_COMPAT_MTIME		0x00000002u
#define EROFS_FEATURE_COMPAT_XATTR_FILTER	0x00000004u
#define EROFS_FEATURE_COMPAT_SHARED_EA_IN_METABOX 0x00000008u
#define EROFS_FEATURE_COMPAT_PLAIN_XATTR_PFX	0x00000010u

/* feature_incompat: an unknown bit makes the image unreadable */
#define EROFS_FEATURE_INCOMPAT_ZERO_PADDING	0x00000001u
#define EROFS_FEATURE_INCOMPAT_COMPR_CFGS	0x00000002u
#define EROFS_FEATURE_INCOMPAT_BIG_PCLUSTER	0x00000002u
#define EROFS_FEATURE_INCOMPAT_CHUNKED_FILE	0x00000004u
#define EROFS_FEATURE_INCOMPAT_DEVICE_TABLE	0x00000008u
#define EROFS_FEATURE_INCOMPAT_COMPR_HEAD2	0x00000008u
#define EROFS_FEATURE_INCOMPAT_ZTAILPACKING	0x00000010u
#define EROFS_FEATURE_INCOMPAT_FRAGMENTS	0x00000020u
#define EROFS_FEATURE_INCOMPAT_DEDUPE		0x00000020u
#define EROFS_FEATURE_INCOMPAT_XATTR_PREFIXES	0x00000040u
#define EROFS_FEATURE_INCOMPAT_48BIT		0x00000080u
#define EROFS_FEATURE_INCOMPAT_METABOX		0x00000100u
#define EROFS_ALL_FEATURE_INCOMPAT		0x000001FFu

struct erofs_super_block {
	uint32_t magic;			/* EROFS_SUPER_MAGIC */
	uint32_t checksum;		/* CRC32C of the sb block, see docs/format.md */
	uint32_t feature_compat;
	uint8_t blkszbits;		/* log2 of block size */
	uint8_t sb_extslots;		/* extra 16-byte slots after 128 bytes */
	union {
		uint16_t rootnid_2b;	/* root nid (16 bit) */
		uint16_t blocks_hi;	/* 48BIT with rootnid_8b != 0 */
	} rb;
	uint64_t inos;			/* inode count (statfs only) */
	uint64_t epoch;			/* seconds; base of compact mtimes */
	uint32_t fixed_nsec;		/* nanoseconds of compact mtimes */
	uint32_t blocks_lo;		/* image size in blocks */
	uint32_t meta_blkaddr;		/* block of inode slot 0 */
	uint32_t xattr_blkaddr;		/* block of shared xattr id 0 */
	uint8_t uuid[16];
	uint8_t volume_name[16];	/* label, NUL padded */
	uint32_t feature_incompat;
	union {
		uint16_t available_compr_algs;	/* COMPR_CFGS: bitmap */
		uint16_t lz4_max_distance;	/* otherwise */
	} u1;
	uint16_t extra_devices;
	uint16_t devt_slotoff;		/* device table at slotoff * 128 */
	uint8_t dirblkbits;		/* must be 0 */
	uint8_t xattr_prefix_count;
	uint32_t xattr_prefix_start;	/* prefix table at value * 4 */
	uint64_t packed_nid;		/* fragments inode, 0 = none */
	uint8_t xattr_filter_reserved;	/* 0 for the bloom filter to apply */
	uint8_t ishare_xattr_prefix_id;
	uint8_t reserved[2];
	uint32_t build_time;		/* seconds after epoch */
	uint64_t rootnid_8b;		/* 48BIT: 64-bit root nid */
	uint8_t reserved2[8];
} __attribute__((packed));
_Static_assert(sizeof(struct erofs_super_block) == 128, "sb size");

/* i_format: bit 0 version, bits 1-3 data layout, bit 4 NLINK_1/DOT_OMITTED */
#define EROFS_INODE_LAYOUT_COMPACT	0
#define EROFS_INODE_LAYOUT_EXTENDED	1
#define EROFS_I_VERSION_MASK		0x1u
#define EROFS_I_DATALAYOUT_SHIFT	1
#define EROFS_I_DATALAYOUT_MASK		0x7u
#define EROFS_I_NLINK_1_BIT		0x10u	/* non-dir compact inodes */
#define EROFS_I_DOT_OMITTED_BIT		0x10u	/* directories */
#define EROFS_I_ALL_BITS		0x1Fu

enum erofs_datalayout {
	EROFS_INODE_FLAT_PLAIN = 0,
	EROFS_INODE_COMPRESSED_FULL = 1,
	EROFS_INODE_FLAT_INLINE = 2,
	EROFS_INODE_COMPRESSED_COMPACT = 3,
	EROFS_INODE_CHUNK_BASED = 4,
	EROFS_INODE_DATALAYOUT_MAX
};

/* chunk format, in i_u of CHUNK_BASED inodes */
#define EROFS_CHUNK_FORMAT_BLKBITS_MASK	0x001Fu	/* chunkbits - blkszbits */
#define EROFS_CHUNK_FORMAT_INDEXES	0x0020u	/* 8-byte entries */
#define EROFS_CHUNK_FORMAT_48BIT	0x0040u
#define EROFS_CHUNK_FORMAT_ALL		0x007Fu

union erofs_inode_i_u {
	uint32_t blocks_lo;		/* compressed: physical blocks */
	uint32_t startblk_lo;		/* flat: first data block */
	uint32_t rdev;			/* chr/blk: new-style encoded dev */
	struct {
		uint16_t format;	/* EROFS_CHUNK_FORMAT_* */
		uint16_t reserved;
	} c;
} __attribute__((packed));

struct erofs_inode_compact {
	uint16_t i_format;
	uint16_t i_xattr_icount;	/* inline xattr area size code */
	uint16_t i_mode;
	uint16_t i_nb;			/* nlink, or high address bits */
	uint32_t i_size;
	uint32_t i_mtime;		/* seconds after sb epoch */
	union erofs_inode_i_u i_u;
	uint32_t i_ino;			/* serial, not used by Linux */
	uint16_t i_uid;
	uint16_t i_gid;
	uint32_t i_reserved;
} __attribute__((packed));
_Static_assert(sizeof(struct erofs_inode_compact) == 32, "compact inode");

struct erofs_inode_extended {
	uint16_t i_format;
	uint16_t i_xattr_icount;
	uint16_t i_mode;
	uint16_t i_nb;			/* startblk_hi / blocks_hi */
	uint64_t i_size;
	union erofs_inode_i_u i_u;
	uint32_t i_ino;
	uint32_t i_uid;
	uint32_t i_gid;
	uint64_t i_mtime;		/* seconds (signed) */
	uint32_t i_mtime_nsec;
	uint32_t i_nlink;
	uint8_t i_reserved2[16];
} __attribute__((packed));
_Static_assert(sizeof(struct erofs_inode_extended) == 64, "extended inode");

/* 4-byte chunk map entry is a bare le32 block (EROFS_NULL_ADDR32 = hole) */
struct erofs_inode_chunk_index {
	uint16_t startblk_hi;		/* 48BIT chunk format only */
	uint16_t device_id;		/* 0 = primary device */
	uint32_t startblk_lo;
} __attribute__((packed));
_Static_assert(sizeof(struct erofs_inode_chunk_index) == 8, "chunk index");

/* one slot of the device table (INCOMPAT_DEVICE_TABLE), at devt_slotoff * 128 */
#define EROFS_DEVT_SLOT_SIZE	128u
#define EROFS_DEVICE_TAG_LEN	64u
struct erofs_deviceslot {
	uint8_t tag[EROFS_DEVICE_TAG_LEN];	/* NUL padded: a path, digest or UUID */
	uint32_t blocks_lo;		/* device size in blocks */
	uint32_t uniaddr_lo;		/* first block in the unified address space */
	uint16_t blocks_hi;		/* 48BIT only */
	uint16_t uniaddr_hi;		/* 48BIT only */
	uint8_t reserved[52];
} __attribute__((packed));
_Static_assert(sizeof(struct erofs_deviceslot) == EROFS_DEVT_SLOT_SIZE,
	       "device slot");

/* inline xattr area header, right after the inode core */
struct erofs_xattr_ibody_header {
	uint32_t h_name_filter;		/* bloom: set bit = no such name */
	uint8_t h_shared_count;
	uint8_t h_reserved2[7];
	/* uint32_t h_shared_xattrs[h_shared_count]; */
} __attribute__((packed));
_Static_assert(sizeof(struct erofs_xattr_ibody_header) == 12, "xattr ibody");

#define EROFS_XATTR_INDEX_USER			1
#define EROFS_XATTR_INDEX_POSIX_ACL_ACCESS	2
#define EROFS_XATTR_INDEX_POSIX_ACL_DEFAULT	3
#define EROFS_XATTR_INDEX_TRUSTED		4
#define EROFS_XATTR_INDEX_LUSTRE		5
#define EROFS_XATTR_INDEX_SECURITY		6
#define EROFS_XATTR_LONG_PREFIX			0x80u
#define EROFS_XATTR_LONG_PREFIX_MASK		0x7Fu
#define EROFS_XATTR_FILTER_BITS			32
#define EROFS_XATTR_FILTER_DEFAULT		0xFFFFFFFFu
#define EROFS_XATTR_FILTER_SEED			0x25BBE08Fu

struct erofs_xattr_entry {
	uint8_t e_name_len;		/* length of the name suffix */
	uint8_t e_name_index;		/* EROFS_XATTR_INDEX_* or long prefix */
	uint16_t e_value_size;
	/* char e_name[e_name_len]; then the value; padded to 4 bytes */
} __attribute__((packed));
_Static_assert(sizeof(struct erofs_xattr_entry) == 4, "xattr entry");

/* long xattr prefix record body (after its le16 length) */
struct erofs_xattr_long_prefix {
	uint8_t base_index;		/* short index of the prefix start */
	/* char infix[]; */
} __attribute__((packed));

/* directory entry; names follow the dirent array inside each block */
struct erofs_dirent {
	uint64_t nid;
	uint16_t nameoff;		/* name offset within the block */
	uint8_t file_type;		/* EROFS_FT_* */
	uint8_t reserved;
} __attribute__((packed));
_Static_assert(sizeof(struct erofs_dirent) == 12, "dirent");

enum erofs_file_type {
	EROFS_FT_UNKNOWN = 0,
	EROFS_FT_REG_FILE = 1,
	EROFS_FT_DIR = 2,
	EROFS_FT_CHRDEV = 3,
	EROFS_FT_BLKDEV = 4,
	EROFS_FT_FIFO = 5,
	EROFS_FT_SOCK = 6,
	EROFS_FT_SYMLINK = 7,
	EROFS_FT_MAX
};

/* compression algorithms, as numbered on disk */
enum erofs_compr_alg {
	Z_EROFS_COMPRESSION_LZ4 = 0,
	Z_EROFS_COMPRESSION_LZMA = 1,
	Z_EROFS_COMPRESSION_DEFLATE = 2,
	Z_EROFS_COMPRESSION_ZSTD = 3,
	Z_EROFS_COMPRESSION_MAX
};

/* compression config record payloads (each after an le16 length) */
struct z_erofs_lz4_cfgs {
	uint16_t max_distance;		/* LZ4 window, 0 = 64 KiB */
	uint16_t max_pclusterblks;	/* largest LZ4 pcluster in blocks */
	uint8_t reserved[10];
} __attribute__((packed));
_Static_assert(sizeof(struct z_erofs_lz4_cfgs) == 14, "lz4 cfgs");

struct z_erofs_lzma_cfgs {
	uint32_t dict_size;		/* 4 KiB .. 8 MiB */
	uint16_t format;		/* 0 */
	uint8_t reserved[8];
} __attribute__((packed));
_Static_assert(sizeof(struct z_erofs_lzma_cfgs) == 14, "lzma cfgs");

struct z_erofs_deflate_cfgs {
	uint8_t windowbits;		/* <= 15 */
	uint8_t reserved[5];
} __attribute__((packed));
_Static_assert(sizeof(struct z_erofs_deflate_cfgs) == 6, "deflate cfgs");

struct z_erofs_zstd_cfgs {
	uint8_t format;			/* 0 */
	uint8_t windowlog;		/* window = 1 << (windowlog + 10) */
	uint8_t reserved[4];
} __attribute__((packed));
_Static_assert(sizeof(struct z_erofs_zstd_cfgs) == 6, "zstd cfgs");

/* compressed inode map header, at round_up(end of xattrs, 8) */
#define Z_EROFS_ADVISE_COMPACTED_2B		0x0001u
#define Z_EROFS_ADVISE_EXTENTS			0x0001u	/* FULL layout */
#define Z_EROFS_ADVISE_BIG_PCLUSTER_1		0x0002u
#define Z_EROFS_ADVISE_BIG_PCLUSTER_2		0x0004u
#define Z_EROFS_ADVISE_INLINE_PCLUSTER		0x0008u
#define Z_EROFS_ADVISE_INTERLACED_PCLUSTER	0x0010u
#define Z_EROFS_ADVISE_FRAGMENT_PCLUSTER	0x0020u
#define Z_EROFS_ADVISE_EXTRECSZ_BIT		1
#define Z_EROFS_ADVISE_EXTRECSZ_MASK		0x3u
#define Z_EROFS_FRAGMENT_INODE_BIT		7	/* h_clusterbits bit 7 */

struct z_erofs_map_header {
	union {
		uint32_t h_fragmentoff;	/* FRAGMENT_PCLUSTER */
		struct {
			uint16_t h_reserved1;
			uint16_t h_idata_size;	/* INLINE_PCLUSTER */
		} t;
		uint32_t h_extents_lo;	/* EXTENTS, recsz >= 16 */
	} u;
	uint16_t h_advise;
	union {
		struct {
			uint8_t h_algorithmtype;  /* lo: HEAD1, hi: HEAD2 */
			uint8_t h_clusterbits;    /* lclusterbits - blkszbits */
		} a;
		uint16_t h_extents_hi;
	} v;
} __attribute__((packed));
_Static_assert(sizeof(struct z_erofs_map_header) == 8, "map header");

/* lcluster types */
enum z_erofs_lcluster_type {
	Z_EROFS_LCLUSTER_TYPE_PLAIN = 0,
	Z_EROFS_LCLUSTER_TYPE_HEAD1 = 1,
	Z_EROFS_LCLUSTER_TYPE_NONHEAD = 2,
	Z_EROFS_LCLUSTER_TYPE_HEAD2 = 3,
	Z_EROFS_LCLUSTER_TYPE_MAX
};

#define Z_EROFS_LI_LCLUSTER_TYPE_MASK	0x0003u
#define Z_EROFS_LI_PARTIAL_REF		0x8000u
#define Z_EROFS_LI_D0_CBLKCNT		0x0800u	/* delta[0] is a block count */
#define Z_EROFS_LI_D0_MASK		0x07FFu

/* full index record, one per lcluster */
struct z_erofs_lcluster_index {
	uint16_t di_advise;
	uint16_t di_clusterofs;		/* HEAD/PLAIN: extent start in lcluster */
	union {
		uint32_t blkaddr;	/* HEAD/PLAIN: pcluster block */
		uint16_t delta[2];	/* NONHEAD: back, forward lclusters */
	} di_u;
} __attribute__((packed));
_Static_assert(sizeof(struct z_erofs_lcluster_index) == 8, "lcluster index");

/* encoded extent record (48-bit layout); recsz is a prefix of this */
#define Z_EROFS_EXTENT_PLEN_MASK	0x001FFFFFu
#define Z_EROFS_EXTENT_PLEN_PARTIAL	0x08000000u
#define Z_EROFS_EXTENT_PLEN_FMT_BIT	28

struct z_erofs_extent {
	uint32_t plen;			/* length, partial bit, format */
	uint32_t pstart_lo;		/* physical byte address */
	uint32_t pstart_hi;
	uint32_t lstart_lo;		/* logical byte offset */
	uint32_t lstart_hi;
	uint8_t reserved[12];
} __attribute__((packed));
_Static_assert(sizeof(struct z_erofs_extent) == 32, "extent record");

#define Z_EROFS_PCLUSTER_MAX_SIZE	(1024u * 1024u)
#define Z_EROFS_EXTENT_MAX_LEN		(12u * 1024u * 1024u)

#endif
