"""GPU catalog: one entry per accelerator, all figures integers.

``memory_bytes`` is the total the runtime reports (``torch.cuda.mem_get_info()[1]``,
``get_device_properties(0).total_memory``), taken from public torch/vLLM logs where one was
found. torch prints ``total_memory`` in MiB (bytes // 2**20), so those entries are MiB x 2**20;
entries marked "derived" in ``source`` are computed from the nearest documented figure, as said
there. Apple entries hold the default GPU working set (``recommendedMaxWorkingSetSize``);
llama.cpp prints it divided by 1e6 as "MB".

Bandwidth is decimal bytes/s from the vendor datasheet. FLOP/s are dense tensor peaks per device
(datasheet figures quoted with sparsity are halved); ``fp8_flops`` is None without FP8 tensor
cores. V100 and T4 have no BF16 tensor cores: their ``bf16_flops`` is the FP16 tensor peak.
"""

from __future__ import annotations

from kvplan.hardware import GPU

GPUS: tuple[GPU, ...] = (
    GPU(
        name="h100-sxm",
        display_name="NVIDIA H100 SXM 80GB",
        vendor="nvidia",
        memory_bytes=85_029_027_840,
        bandwidth_bytes_per_s=3_350_000_000_000,
        bf16_flops=989_500_000_000_000,
        fp8_flops=1_979_000_000_000_000,
        source=(
            "memory: torch get_device_properties 'NVIDIA H100 80GB HBM3' "
            "total_memory=81090MB (MiB x 2^20; 79.19 GiB, 81089-81090 on current drivers); "
            "bandwidth/FLOPs: NVIDIA H100 datasheet, sparse/2"
        ),
        aliases=("h100", "h100-80gb", "h100-sxm5"),
    ),
    GPU(
        name="h100-pcie",
        display_name="NVIDIA H100 PCIe 80GB",
        vendor="nvidia",
        memory_bytes=84_943_044_608,
        bandwidth_bytes_per_s=2_000_000_000_000,
        bf16_flops=756_500_000_000_000,
        fp8_flops=1_513_000_000_000_000,
        source=(
            "memory: torch get_device_properties 'NVIDIA H100 PCIe' total_memory=81008MB "
            "(MiB x 2^20); bandwidth/FLOPs: NVIDIA H100 datasheet (PCIe), sparse/2"
        ),
        aliases=("h100-pcie-80gb",),
    ),
    GPU(
        name="h100-nvl",
        display_name="NVIDIA H100 NVL 94GB",
        vendor="nvidia",
        memory_bytes=99_954_458_624,
        bandwidth_bytes_per_s=3_900_000_000_000,
        bf16_flops=835_500_000_000_000,
        fp8_flops=1_670_500_000_000_000,
        source=(
            "memory: derived, torch OOM message on an H100 NVL 'total capacity of 93.09 "
            "GiB' x 1024 = 95324 MiB x 2^20 (+/-5 MiB); bandwidth/FLOPs: NVIDIA H100 NVL "
            "datasheet, sparse/2"
        ),
        aliases=("h100-nvl-94gb",),
    ),
    GPU(
        name="h200",
        display_name="NVIDIA H200 SXM 141GB",
        vendor="nvidia",
        memory_bytes=150_109_945_856,
        bandwidth_bytes_per_s=4_800_000_000_000,
        bf16_flops=989_500_000_000_000,
        fp8_flops=1_979_000_000_000_000,
        source=(
            "memory: torch get_device_properties 'NVIDIA H200' total_memory=143156MB (MiB x "
            "2^20; vLLM logs 139.81 GiB); bandwidth/FLOPs: NVIDIA H200 datasheet (SXM), "
            "sparse/2"
        ),
        aliases=("h200-sxm", "h200-141gb"),
    ),
    GPU(
        name="h20",
        display_name="NVIDIA H20 96GB",
        vendor="nvidia",
        memory_bytes=102_010_716_160,
        bandwidth_bytes_per_s=4_000_000_000_000,
        bf16_flops=148_000_000_000_000,
        fp8_flops=296_000_000_000_000,
        source=(
            "memory: torch get_device_properties 'NVIDIA H20' total_memory=97285MB (MiB x "
            "2^20); bandwidth/FLOPs: NVIDIA H20 spec sheet (dense)"
        ),
        aliases=("h20-96gb",),
    ),
    GPU(
        name="b200",
        display_name="NVIDIA B200 180GB",
        vendor="nvidia",
        memory_bytes=191_514_017_792,
        bandwidth_bytes_per_s=8_000_000_000_000,
        bf16_flops=2_250_000_000_000_000,
        fp8_flops=4_500_000_000_000_000,
        source=(
            "memory: torch get_device_properties 'NVIDIA B200' total_memory=182642MB (MiB x "
            "2^20; 182631 also seen); bandwidth/FLOPs: NVIDIA HGX B200 datasheet per GPU, "
            "sparse/2"
        ),
        aliases=("b200-180gb", "hgx-b200"),
    ),
    GPU(
        name="b300",
        display_name="NVIDIA B300 288GB",
        vendor="nvidia",
        memory_bytes=287_430_410_240,
        bandwidth_bytes_per_s=8_000_000_000_000,
        bf16_flops=2_250_000_000_000_000,
        fp8_flops=4_500_000_000_000_000,
        source=(
            "memory: derived, torch OOM message 'total capacity of 267.69 GiB' (B300 node) "
            "x 1024 = 274115 MiB x 2^20 (+/-5 MiB); bandwidth/FLOPs: NVIDIA HGX B300 "
            "datasheet per GPU, sparse/2"
        ),
        aliases=("b300-sxm", "b300-288gb", "hgx-b300"),
    ),
    GPU(
        name="gb200",
        display_name="NVIDIA GB200 (one Blackwell GPU)",
        vendor="nvidia",
        memory_bytes=197_900_894_208,
        bandwidth_bytes_per_s=8_000_000_000_000,
        bf16_flops=2_500_000_000_000_000,
        fp8_flops=5_000_000_000_000_000,
        source=(
            "memory: derived, torch OOM message on GB200 'total capacity of 184.31 GiB' x "
            "1024 = 188733 MiB x 2^20 (+/-5 MiB); bandwidth/FLOPs: NVIDIA GB200 NVL72 "
            "datasheet / 72 GPUs, sparse/2"
        ),
        aliases=("gb200-nvl72", "gb200-gpu"),
    ),
    GPU(
        name="a100-40gb",
        display_name="NVIDIA A100 SXM4 40GB",
        vendor="nvidia",
        memory_bytes=42_294_312_960,
        bandwidth_bytes_per_s=1_555_000_000_000,
        bf16_flops=312_000_000_000_000,
        fp8_flops=None,
        source=(
            "memory: derived, torch OOM messages 'total capacity of 39.39 GiB' x 1024 = "
            "40335 MiB x 2^20 (+/-5 MiB; Paddle printed 40536MB); bandwidth/FLOPs: NVIDIA "
            "A100 datasheet (dense); no FP8"
        ),
        aliases=("a100-sxm4-40gb",),
    ),
    GPU(
        name="a100-80gb",
        display_name="NVIDIA A100 SXM4 80GB",
        vendor="nvidia",
        memory_bytes=84_987_084_800,
        bandwidth_bytes_per_s=2_039_000_000_000,
        bf16_flops=312_000_000_000_000,
        fp8_flops=None,
        source=(
            "memory: derived, torch OOM messages 'total capacity of 79.15 GiB' x 1024 = "
            "81050 MiB x 2^20 (+/-5 MiB); bandwidth/FLOPs: NVIDIA A100 datasheet (SXM 80GB, "
            "dense); no FP8"
        ),
        aliases=("a100", "a100-sxm4-80gb"),
    ),
    GPU(
        name="a10g",
        display_name="NVIDIA A10G 24GB",
        vendor="nvidia",
        memory_bytes=23_684_186_112,
        bandwidth_bytes_per_s=600_000_000_000,
        bf16_flops=70_000_000_000_000,
        fp8_flops=None,
        source=(
            "memory: torch get_device_properties 'NVIDIA A10G' total_memory=22587MB (MiB x "
            "2^20); bandwidth: 600 GB/s; BF16: approx. 70 TFLOPS dense (AWS figure, NVIDIA "
            "publishes none); no FP8"
        ),
        aliases=("aws-a10g",),
    ),
    GPU(
        name="a10",
        display_name="NVIDIA A10 24GB",
        vendor="nvidia",
        memory_bytes=23_684_186_112,
        bandwidth_bytes_per_s=600_000_000_000,
        bf16_flops=125_000_000_000_000,
        fp8_flops=None,
        source=(
            "memory: derived, no A10 report found; same board memory as A10G (nvidia-smi "
            "23028 MiB on both), so A10G's torch 22587 MiB x 2^20; bandwidth/FLOPs: NVIDIA "
            "A10 datasheet, sparse/2; no FP8"
        ),
        aliases=("a10-24gb",),
    ),
    GPU(
        name="l4",
        display_name="NVIDIA L4 24GB",
        vendor="nvidia",
        memory_bytes=23_654_825_984,
        bandwidth_bytes_per_s=300_000_000_000,
        bf16_flops=121_000_000_000_000,
        fp8_flops=242_500_000_000_000,
        source=(
            "memory: derived, reported L4 total 22.03 GiB x 1024 = 22559 MiB x 2^20 (+/-5 "
            "MiB); bandwidth/FLOPs: NVIDIA L4 datasheet, sparse/2"
        ),
        aliases=("l4-24gb",),
    ),
    GPU(
        name="l40s",
        display_name="NVIDIA L40S 48GB",
        vendor="nvidia",
        memory_bytes=47_803_531_264,
        bandwidth_bytes_per_s=864_000_000_000,
        bf16_flops=362_050_000_000_000,
        fp8_flops=733_000_000_000_000,
        source=(
            "memory: torch get_device_properties 'NVIDIA L40S' total_memory=45589MB (MiB x "
            "2^20; vLLM OOMs show 44.39-44.40 GiB on newer drivers); bandwidth/FLOPs: "
            "NVIDIA L40S datasheet, sparse/2"
        ),
        aliases=("l40s-48gb",),
    ),
    GPU(
        name="l40",
        display_name="NVIDIA L40 48GB",
        vendor="nvidia",
        memory_bytes=47_803_531_264,
        bandwidth_bytes_per_s=864_000_000_000,
        bf16_flops=181_050_000_000_000,
        fp8_flops=362_000_000_000_000,
        source=(
            "memory: derived, no L40 report found; same 48GB GDDR6 ECC board as L40S "
            "(nvidia-smi 46068 MiB), so L40S's torch 45589 MiB x 2^20; bandwidth/FLOPs: "
            "NVIDIA L40 datasheet, sparse/2"
        ),
        aliases=("l40-48gb",),
    ),
    GPU(
        name="v100-16gb",
        display_name="NVIDIA V100 SXM2 16GB",
        vendor="nvidia",
        memory_bytes=16_944_988_160,
        bandwidth_bytes_per_s=900_000_000_000,
        bf16_flops=125_000_000_000_000,
        fp8_flops=None,
        source=(
            "memory: torch get_device_properties 'Tesla V100-SXM2-16GB' "
            "total_memory=16160MB (MiB x 2^20; 16130 also seen); bandwidth: V100 datasheet; "
            "bf16_flops is the FP16 tensor peak (no BF16); no FP8"
        ),
        aliases=("v100-sxm2-16gb",),
    ),
    GPU(
        name="v100-32gb",
        display_name="NVIDIA V100 32GB",
        vendor="nvidia",
        memory_bytes=34_089_205_760,
        bandwidth_bytes_per_s=900_000_000_000,
        bf16_flops=125_000_000_000_000,
        fp8_flops=None,
        source=(
            "memory: torch get_device_properties 'Tesla V100-PCIE-32GB' "
            "total_memory=32510MB (MiB x 2^20), used for SXM2 too; bandwidth: V100 SXM2 "
            "datasheet; bf16_flops is FP16 tensor peak (no BF16)"
        ),
        aliases=("v100", "v100-sxm2-32gb", "v100-pcie-32gb"),
    ),
    GPU(
        name="t4",
        display_name="NVIDIA T4 16GB",
        vendor="nvidia",
        memory_bytes=15_828_254_720,
        bandwidth_bytes_per_s=320_000_000_000,
        bf16_flops=65_000_000_000_000,
        fp8_flops=None,
        source=(
            "memory: torch get_device_properties 'Tesla T4' total_memory=15095MB (MiB x "
            "2^20; 14930-15109 seen by driver); bandwidth: T4 datasheet; bf16_flops is FP16 "
            "tensor peak (no BF16); no FP8"
        ),
        aliases=("tesla-t4",),
    ),
    GPU(
        name="rtx-3090",
        display_name="NVIDIA GeForce RTX 3090 24GB",
        vendor="nvidia",
        memory_bytes=25_437_405_184,
        bandwidth_bytes_per_s=936_000_000_000,
        bf16_flops=71_000_000_000_000,
        fp8_flops=None,
        source=(
            "memory: torch get_device_properties 'NVIDIA GeForce RTX 3090' "
            "total_memory=24259MB (MiB x 2^20; 24575 also seen); bandwidth/FLOPs: Ampere "
            "GA102 whitepaper, FP32-accumulate dense; no FP8"
        ),
        aliases=("3090", "rtx3090"),
    ),
    GPU(
        name="rtx-4090",
        display_name="NVIDIA GeForce RTX 4090 24GB",
        vendor="nvidia",
        memory_bytes=25_756_172_288,
        bandwidth_bytes_per_s=1_008_000_000_000,
        bf16_flops=165_200_000_000_000,
        fp8_flops=330_300_000_000_000,
        source=(
            "memory: torch get_device_properties 'NVIDIA GeForce RTX 4090' "
            "total_memory=24563MB (MiB x 2^20); bandwidth/FLOPs: Ada AD102 whitepaper, "
            "FP32-accumulate dense"
        ),
        aliases=("4090", "rtx4090"),
    ),
    GPU(
        name="rtx-5090",
        display_name="NVIDIA GeForce RTX 5090 32GB",
        vendor="nvidia",
        memory_bytes=34_189_869_056,
        bandwidth_bytes_per_s=1_792_000_000_000,
        bf16_flops=209_500_000_000_000,
        fp8_flops=419_000_000_000_000,
        source=(
            "memory: derived, nvidia-smi 32607 MiB minus 1 MiB (the RTX 4090 smi-to-torch "
            "gap) x 2^20; bandwidth/FLOPs: Blackwell GB202 whitepaper, FP32-accumulate "
            "dense"
        ),
        aliases=("5090", "rtx5090"),
    ),
    GPU(
        name="rtx-6000-ada",
        display_name="NVIDIA RTX 6000 Ada 48GB",
        vendor="nvidia",
        memory_bytes=50_983_862_272,
        bandwidth_bytes_per_s=960_000_000_000,
        bf16_flops=364_250_000_000_000,
        fp8_flops=728_500_000_000_000,
        source=(
            "memory: torch get_device_properties 'NVIDIA RTX 6000 Ada Generation' "
            "total_memory=48622MB (MiB x 2^20); bandwidth/FLOPs: NVIDIA RTX 6000 Ada "
            "datasheet, sparse/2"
        ),
        aliases=("rtx6000-ada",),
    ),
    GPU(
        name="rtx-pro-6000",
        display_name="NVIDIA RTX PRO 6000 Blackwell 96GB",
        vendor="nvidia",
        memory_bytes=101_974_016_000,
        bandwidth_bytes_per_s=1_792_000_000_000,
        bf16_flops=503_800_000_000_000,
        fp8_flops=1_007_600_000_000_000,
        source=(
            "memory: torch total_memory=97250MB on the Server Edition (MiB x 2^20; "
            "Workstation reports 102641369088 B); bandwidth/FLOPs: NVIDIA RTX PRO 6000 "
            "Blackwell datasheet, sparse/2"
        ),
        aliases=("rtx-pro-6000-blackwell", "rtx-pro-6000-server"),
    ),
    GPU(
        name="mi300x",
        display_name="AMD Instinct MI300X 192GB",
        vendor="amd",
        memory_bytes=206_141_652_992,
        bandwidth_bytes_per_s=5_300_000_000_000,
        bf16_flops=1_307_400_000_000_000,
        fp8_flops=2_614_900_000_000_000,
        source=(
            "memory: torch (ROCm) get_device_properties 'AMD Instinct MI300X' "
            "total_memory=196592MB (MiB x 2^20); bandwidth/FLOPs: AMD MI300X datasheet "
            "(dense)"
        ),
        aliases=("mi300",),
    ),
    GPU(
        name="mi325x",
        display_name="AMD Instinct MI325X 256GB",
        vendor="amd",
        memory_bytes=274_861_129_728,
        bandwidth_bytes_per_s=6_000_000_000_000,
        bf16_flops=1_307_400_000_000_000,
        fp8_flops=2_614_900_000_000_000,
        source=(
            "memory: derived, 256 GiB minus 16 MiB as MI300X reports (192 GiB - 16 MiB) = "
            "262128 MiB x 2^20, matching ROCm OOM 'total capacity of 255.98 GiB'; "
            "bandwidth/FLOPs: AMD MI325X datasheet (dense)"
        ),
        aliases=("mi325",),
    ),
    GPU(
        name="mi355x",
        display_name="AMD Instinct MI355X 288GB",
        vendor="amd",
        memory_bytes=309_220_868_096,
        bandwidth_bytes_per_s=8_000_000_000_000,
        bf16_flops=2_516_600_000_000_000,
        fp8_flops=5_033_200_000_000_000,
        source=(
            "memory: derived, 288 GiB minus 16 MiB as MI300X reports = 294896 MiB x 2^20, "
            "matching ROCm OOM 'total capacity of 287.98 GiB'; bandwidth/FLOPs: AMD MI355X "
            "datasheet (dense)"
        ),
        aliases=("mi355",),
    ),
    GPU(
        name="m2-ultra-192gb",
        display_name="Apple M2 Ultra 192GB",
        vendor="apple",
        memory_bytes=154_618_822_656,
        bandwidth_bytes_per_s=800_000_000_000,
        bf16_flops=27_200_000_000_000,
        fp8_flops=None,
        source=(
            "memory: derived, macOS default working set 75% of 192 GiB = 144 GiB (llama.cpp "
            "would print 154618.82 MB, MB = 1e6 B); bandwidth: Apple spec; FLOPs: approx. "
            "FP32 ALU peak, 76-core GPU"
        ),
        aliases=("m2-ultra",),
        unified_memory=True,
    ),
    GPU(
        name="m3-max-128gb",
        display_name="Apple M3 Max 128GB",
        vendor="apple",
        memory_bytes=103_079_215_104,
        bandwidth_bytes_per_s=400_000_000_000,
        bf16_flops=14_200_000_000_000,
        fp8_flops=None,
        source=(
            "memory: llama.cpp ggml_metal_init recommendedMaxWorkingSetSize = 103079.22 MB "
            "(MB = 1e6 B) = 96 GiB; bandwidth: Apple spec (40-core GPU); FLOPs: approx. "
            "FP32 ALU peak"
        ),
        aliases=("m3-max",),
        unified_memory=True,
    ),
    GPU(
        name="m4-max-128gb",
        display_name="Apple M4 Max 128GB",
        vendor="apple",
        memory_bytes=103_079_215_104,
        bandwidth_bytes_per_s=546_000_000_000,
        bf16_flops=16_100_000_000_000,
        fp8_flops=None,
        source=(
            "memory: derived, same 96 GiB default working set as the logged M3 Max 128GB "
            "(newer macOS may report 107.52 GiB); bandwidth: Apple spec (40-core GPU); "
            "FLOPs: approx. FP32 ALU peak"
        ),
        aliases=("m4-max",),
        unified_memory=True,
    ),
    GPU(
        name="m3-ultra-512gb",
        display_name="Apple M3 Ultra 512GB",
        vendor="apple",
        memory_bytes=498_216_206_336,
        bandwidth_bytes_per_s=819_000_000_000,
        bf16_flops=28_400_000_000_000,
        fp8_flops=None,
        source=(
            "memory: llama.cpp ggml_metal_device_init recommendedMaxWorkingSetSize = "
            "498216.21 MB (MB = 1e6 B) = 464 GiB; bandwidth: Apple spec (80-core GPU); "
            "FLOPs: approx. FP32 ALU peak"
        ),
        aliases=("m3-ultra",),
        unified_memory=True,
    ),
)
